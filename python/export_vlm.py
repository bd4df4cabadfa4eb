"""Export a Hugging Face vision-language checkpoint (LlavaForConditionalGeneration,
Gemma3ForConditionalGeneration, Idefics3ForConditionalGeneration, SmolVLMForConditionalGeneration,
Qwen2VLForConditionalGeneration) into a torch-node causal-LM folder that also takes images.

    python export_vlm.py MODEL_DIR OUT_DIR [--max-context N] [--max-batch N]

Writes OUT_DIR/ as export_causal_lm.py does (model.pt2, tokenizer files with the processor's
chat template, generation_config.json, manifest.json of kind "causal-lm"), plus:

  vision.pt       the vision tower and the multi-modal projector (TorchScript, traced):
                  pixel_values float32 [B, 3, S, S] -> the decoder's input embeddings of the
                  image tokens, float32 [B, N, hidden] (transformers' get_image_features: the
                  config's vision_feature_layer(s) and vision_feature_select_strategy);
  preprocess.pt   the checkpoint's image processor (CLIPImageProcessor, Gemma3ImageProcessor
                  without pan-and-scan) as export_clip.py
                  scripts it: uint8 RGB [3, h, w] -> pixel_values [3, S, S], the kernels
                  transformers 5's torchvision backend runs.

Idefics3 and SmolVLM (vlm_idefics3.py) tile each image: vision.pt takes the tiles [frames, 3, S, S],
preprocess.pt returns them in their grid [rows + 1, cols, 3, S, S], and the manifest's
expansion.grid says the prompt each grid makes.

Qwen2-VL (vlm_qwen2.py) resizes each image to its own patch grid: preprocess.pt returns
[gh, gw, D], vision.pt takes one image's patches and their (row, column) positions, the prompt
holds gh * gw / merge^2 image tokens per image, and the decoder step takes one more input after
image_mask, `rope [3, B, T]`: the M-RoPE positions (manifest vision.mrope).

The decoder program is export_causal_lm's step with two more inputs:

    logits = model(input_ids [B, T], positions [B, T], image_embeds [B, T, hidden] float32,
                   image_mask [B, T] bool, past.0.key, ..., past.{L-1}.value)

where image_mask[b, t] the token's input embedding is image_embeds[b, t] (an image token),
elsewhere the embedding table's row of input_ids[b, t]. Decode steps pass a [B, 1, hidden] zero
tensor and a false mask: a gather and a select more than a text LM's step. Gemma 3's step also
lets each image's tokens attend to each other (image_block_attention). The manifest's "vision"
says the image token ids, the tokens per image (N), what the processor writes for the template's
image token (`expansion`, as text and as ids), the processor's settings and the programs.
float32 only.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_causal_lm as lm  # noqa: E402
from export_causal_lm import ExportError  # noqa: E402
import vlm_idefics3 as idefics3  # noqa: E402
import vlm_qwen2 as qwen2  # noqa: E402

ARCHITECTURES = ("LlavaForConditionalGeneration", "Gemma3ForConditionalGeneration", *idefics3.ARCHITECTURES, *qwen2.ARCHITECTURES)
# Families whose image tokens attend to each other both ways during prefill (Gemma 3:
# token_type_ids -> create_masks_for_vision_model's blockwise overlay).
BIDIRECTIONAL_IMAGES = ("gemma3",)
IMAGE_ATTENTION = "torch_node_image_blocks"


def is_vlm(model_dir):
    """True when config.json names an architecture this script exports (lib/cli.js's dispatch)."""
    try:
        config = lm.read_config(model_dir)
    except ExportError:
        return False
    return any(a in ARCHITECTURES for a in config.get("architectures") or [])


def text_model(vlm):
    """The decoder as transformers' own causal-LM class of its text config, holding the VLM's
    language model and head (the same tensors: nothing copied)."""
    import transformers

    config = vlm.config.text_config
    lm.causal_lm_class(config)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    model.model = language_model(vlm)
    model.lm_head = vlm.lm_head
    model.generation_config = vlm.generation_config
    return model


def language_model(vlm):
    """The VLM's decoder (without its head): Idefics3/SmolVLM name it text_model."""
    return vlm.model.text_model if idefics3.is_idefics3(vlm) else vlm.model.language_model


def vision_module(vlm):
    """pixel_values [B, 3, S, S] -> [B, N, hidden]: LlavaModel.get_image_features without its
    per-image list (a traced program keeps the batch dimension)."""
    import torch

    config = vlm.config
    if config.model_type == "gemma3":
        return Gemma3Vision(vlm).eval()
    if idefics3.is_idefics3(vlm):
        return idefics3.vision_module(vlm)
    layer = config.vision_feature_layer
    strategy = config.vision_feature_select_strategy

    class Vision(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tower, self.projector = vlm.model.vision_tower, vlm.model.multi_modal_projector

        def forward(self, pixel_values):
            states = self.tower(pixel_values, output_hidden_states=True, return_dict=True).hidden_states
            layers = [layer] if isinstance(layer, int) else list(layer)
            picked = [states[i][:, 1:] if strategy == "default" else states[i] for i in layers]
            return self.projector(torch.cat(picked, dim=-1)).float()

    return Vision().eval()


def Gemma3Vision(vlm):
    """Gemma3Model.get_image_features: the SigLIP tower's last hidden state, average-pooled to
    mm_tokens_per_image, RMS-normed and projected (Gemma3MultiModalProjector)."""
    import torch

    class Vision(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tower, self.projector = vlm.model.vision_tower, vlm.model.multi_modal_projector

        def forward(self, pixel_values):
            states = self.tower(pixel_values=pixel_values, return_dict=True).last_hidden_state
            return self.projector(states).float()

    return Vision()


class ImageBlocks:
    """The step's reach per token, `[B, T]` (set by Step.forward around the model's forward):
    the last position of the token's run of image tokens in this call, its own position for any
    other token. None: plain causal attention (LLaVA)."""

    reach = None


def image_block_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                          sliding_window=None, softcap=None, **kwargs):
    """export_causal_lm's caller_cache_attention with Gemma 3's image blocks: token (b, t) attends
    to slots 0..=reach[b, t] (an image token also to the rest of its image, transformers'
    blockwise overlay on the causal mask), and on a sliding layer only to slots
    > positions[b, t] - window (transformers: AND(sliding_window, OR(causal, blockwise)))."""
    import torch

    positions, reach = lm.StepState.positions, ImageBlocks.reach
    if reach is None:  # no image blocks (export_causal_lm's shape probe)
        return lm.caller_cache_attention(module, query, key, value, attention_mask, scaling, dropout,
                                         sliding_window, softcap, **kwargs)
    if softcap is not None:
        raise ExportError("attention-logit soft-capping with image blocks is not supported")
    window = sliding_window if sliding_window is not None else getattr(module, "sliding_window", None)
    slots = torch.arange(key.shape[2], device=query.device).view(1, 1, -1)
    allowed = slots <= reach.unsqueeze(-1)
    if window is not None:
        allowed = allowed & (slots > positions.unsqueeze(-1) - window)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=allowed.unsqueeze(1), scale=scaling, enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def image_reach(positions, image_mask):
    """ImageBlocks.reach: for each image token the position of the last token of its run (its
    image: the processor writes each image's tokens together, framed by text tokens)."""
    import torch

    # The first text token at or after each token (a reversed running minimum; no slicing, which
    # would make torch.export guard the sequence length), one before it; the call's last position
    # where the image runs to the end.
    text_at = torch.where(image_mask, torch.full_like(positions, 2**62), positions)
    next_text = torch.cummin(text_at.flip(1), 1).values.flip(1)
    reach = torch.minimum(next_text - 1, positions.amax(1, keepdim=True))
    return torch.where(image_mask, reach, positions)


def step_module(model, bidirectional=False):
    """export_causal_lm's step, with the image embeddings placed at the image tokens; with
    `bidirectional` (Gemma 3) each image's tokens also attend to each other (image_block_attention)."""
    import torch

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.base, self.head = model.base_model, model.get_output_embeddings()
            object.__setattr__(self, "lm", model)

        def forward(self, input_ids, positions, image_embeds, image_mask, *cache):
            # The image token's id may lie past the embedding table (LLaVA's does in some
            # checkpoints): its rows read row 0, then take the image's embedding.
            embeds = self.lm.get_input_embeddings()(torch.where(image_mask, 0, input_ids))
            embeds = torch.where(image_mask.unsqueeze(-1), image_embeds.to(embeds.dtype), embeds)
            lm.StepState.positions = positions
            ImageBlocks.reach = image_reach(positions, image_mask) if bidirectional else None
            try:
                out = self.lm(inputs_embeds=embeds, position_ids=positions,
                              past_key_values=lm.CallerCache(list(cache), positions), use_cache=True,
                              logits_to_keep=1)
            finally:
                lm.StepState.positions = ImageBlocks.reach = None
            return out.logits[:, -1].float()

    return Step().eval()


def export_program(layout, step, hidden, max_context, max_batch, path, compile_options=None, mrope=False):
    import torch
    from torch.export import Dim

    batch, seq, capacity = 2, 3, 8
    ids = torch.zeros(batch, seq, dtype=torch.long)
    positions = torch.arange(seq).repeat(batch, 1)
    embeds = torch.zeros(batch, seq, hidden)
    mask = torch.zeros(batch, seq, dtype=torch.bool)
    cache = lm.new_cache(layout, batch, capacity, torch.float32)
    b = Dim("batch", min=1, max=max_batch)
    t = Dim("seq", min=1, max=max_context)
    c = Dim("context", min=2, max=max_context)
    dynamic = ({0: b, 1: t}, {0: b, 1: t}, {0: b, 1: t}, {0: b, 1: t}, tuple({0: b, 2: c} for _ in cache))
    inputs = (ids, positions, embeds, mask)
    if mrope:  # Qwen2-VL: the M-RoPE positions [3, B, T] after the image mask
        inputs += (positions.unsqueeze(0).repeat(3, 1, 1),)
        dynamic = dynamic[:4] + ({1: b, 2: t},) + dynamic[4:]
    with torch.no_grad():
        program = torch.export.export(step, (*inputs, *cache), dynamic_shapes=dynamic)
    torch._inductor.aoti_compile_and_package(program, package_path=path, inductor_configs=compile_options or None)


def check_ids(config, tokens_per_image):
    """A prompt [1, T]: 3 random tokens, one image's tokens, 4 random tokens."""
    import torch

    g = torch.Generator().manual_seed(0)
    vocab = config.text_config.vocab_size
    pick = lambda n: torch.randint(0, vocab, (1, n), generator=g)  # noqa: E731
    pre, post = pick(3), pick(4)
    pre[pre == config.image_token_id], post[post == config.image_token_id] = 0, 0
    image = torch.full((1, tokens_per_image), config.image_token_id)
    return torch.cat([pre, image, post], 1)


def bidirectional(vlm):
    return vlm.config.model_type in BIDIRECTIONAL_IMAGES


def mask_to_types(ids, vlm):
    """The processor's token_type_ids (Gemma 3): 1 at the image tokens."""
    return (ids == vlm.config.image_token_id).long()


def expansion(processor, vlm, size, tokens_per_image):
    """What the processor writes for each image token of the rendered chat. As text (`text`):
    Gemma3Processor's "\\n\\n<start_of_image>" + N soft tokens + "<end_of_image>\\n\\n", LLaVA's
    N image tokens; checked: the rendered chat with each template image token replaced by it,
    tokenized, is the processor's input_ids. As ids (`prefix`, N image ids, `suffix` in place of
    the template token's id), where that is exact (`tokenLevel`): the template's ids, so
    expanded, are the processor's on probe chats. It is not where the tokenizer merges the
    replacement's edges with the text around it (Gemma's "\\n" runs): then only the text
    expansion reproduces the processor."""
    import torch

    tokenizer = processor.tokenizer
    template_token = processor.image_token
    template_id = tokenizer.convert_tokens_to_ids(template_token)
    image_id = int(vlm.config.image_token_id)
    replacement = getattr(processor, "full_image_sequence", None) or template_token * tokens_per_image
    image = torch.zeros(3, size, size, dtype=torch.uint8)
    encode = lambda t: tokenizer(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    middles = []
    for parts in ([{"type": "text", "text": "Look: "}, {"type": "image"}, {"type": "text", "text": " What is it?"}],
                  [{"type": "image"}, {"type": "text", "text": "What is it?"}]):
        text = processor.apply_chat_template([{"role": "user", "content": parts}], tokenize=False,
                                             add_generation_prompt=True)
        plain = encode(text)
        full = processor(text=text, images=[image], add_special_tokens=False, return_tensors="pt")["input_ids"][0]
        full = full.tolist()
        if plain.count(template_id) != 1:
            raise ExportError(f"the chat template writes {plain.count(template_id)} '{template_token}' tokens for one image")
        if encode(text.replace(template_token, replacement)) != full:
            raise ExportError(f"the processor's expansion of '{template_token}' is not {replacement!r}")
        at = plain.index(template_id)
        before, after = plain[:at], plain[at + 1:]
        exact = full[:at] == before and full[len(full) - len(after):] == after
        middles.append(full[at:len(full) - len(after)] if exact else None)
    middle = encode(replacement)
    if middle.count(image_id) != tokens_per_image:
        raise ExportError(f"the processor writes {middle.count(image_id)} image tokens, the vision tower makes "
                          f"{tokens_per_image}")
    first = middle.index(image_id)
    if middle[first:first + tokens_per_image] != [image_id] * tokens_per_image:
        raise ExportError(f"the processor's image tokens are not contiguous: {middle}")
    return {"templateToken": template_token, "templateTokenId": template_id, "text": replacement,
            "prefix": middle[:first], "suffix": middle[first + tokens_per_image:],
            "tokenLevel": all(m == middle for m in middles)}


def check(what, step, vision, layout, hidden, vlm, pixels, ids, log):
    """The program (prefill of `ids` with one image, then two greedy decodes) against
    transformers' forward on the same tokens (Gemma 3: with the processor's token_type_ids): max
    logit difference. `pixels`: the vision program's input for the one image (Idefics3: its
    frames, which transformers takes as [1, frames, 3, S, S])."""
    import torch

    with torch.no_grad():
        features = vision(pixels).reshape(-1, hidden)
        mask = ids == vlm.config.image_token_id
        embeds = torch.zeros(1, ids.shape[1], hidden)
        embeds[mask] = features
        cache = lm.new_cache(layout, 1, ids.shape[1] + 4, torch.float32)
        got = [step(ids, torch.arange(ids.shape[1]).view(1, -1), embeds, mask, *cache)]
        seq = ids
        for _ in range(2):
            token = got[-1].argmax(-1).view(1, 1)
            seq = torch.cat([seq, token], 1)
            at = torch.tensor([[seq.shape[1] - 1]])
            got.append(step(token, at, torch.zeros(1, 1, hidden), torch.zeros(1, 1, dtype=torch.bool), *cache))
        # transformers' default attention for the reference (the decoder's modules are shared).
        text = language_model(vlm)
        own = text.config._attn_implementation
        text.set_attn_implementation("sdpa")
        try:
            extra = {"token_type_ids": mask_to_types(seq, vlm)} if bidirectional(vlm) else {}
            reference = pixels.unsqueeze(0) if idefics3.is_idefics3(vlm) else pixels
            want = vlm(input_ids=seq, pixel_values=reference, **extra).logits[0, -3:].float()
        finally:
            text.set_attn_implementation(own)
    worst = (torch.cat(got) - want).abs().max().item()
    log(f"{what}: vs transformers' {type(vlm).__name__}, a prefill with one image and two decodes: "
        f"max logit difference {worst:.2g} (tolerance {lm.FP32_TOLERANCE:g})")
    if not worst <= lm.FP32_TOLERANCE:
        raise ExportError(f"{what}: the exported program does not match transformers (max logit difference {worst:.3g})")
    return worst


def export(model_dir, out_dir, max_context=None, max_batch=64, log=print, compile_options=None):
    """Exports `model_dir` into `out_dir`; returns the manifest."""
    import torch
    import transformers

    import decode_gemv
    from export_clip import Preprocess, processor_settings

    if not is_vlm(model_dir):
        raise ExportError(f"{model_dir}: not a vision-language model this exporter knows ({', '.join(ARCHITECTURES)})")
    log(f"{os.path.basename(os.path.normpath(model_dir))}: reading the model with transformers")
    architecture = next(a for a in lm.read_config(model_dir)["architectures"] if a in ARCHITECTURES)
    tiled = architecture in idefics3.ARCHITECTURES
    mrope = architecture in qwen2.ARCHITECTURES
    if tiled:
        idefics3.allow_without_num2words()
    vlm = getattr(transformers, architecture).from_pretrained(model_dir, dtype="float32").eval()
    for p in vlm.parameters():
        p.requires_grad_(False)
    processor = transformers.AutoProcessor.from_pretrained(model_dir)
    if getattr(processor.image_processor, "do_pan_and_scan", None):
        raise ExportError("the image processor has do_pan_and_scan on: pan-and-scan crops are not supported")
    if mrope:
        return export_mrope(vlm, processor, out_dir, model_dir, max_context, max_batch, log, compile_options)
    settings = idefics3.settings(processor) if tiled else processor_settings(processor.image_processor)
    size = int(vlm.config.vision_config.image_size)
    vision = vision_module(vlm)
    with torch.no_grad():
        tokens_per_image = int(vision(torch.zeros(1, 3, size, size)).shape[1])
    if tiled:
        # Each tile is image_seq_len tokens (processing_idefics3.py); the tiles are the tower's images.
        if settings["maxImageSize"]["longest_edge"] != size:
            raise ExportError(f"the processor's tiles are {settings['maxImageSize']['longest_edge']} pixels, the "
                              f"vision tower takes {size}")
        expanded = int(processor.image_seq_len)
    else:
        # The processor's own count (processing_llava.py): the program must make that many.
        probe = processor(text=processor.image_token, images=torch.zeros(3, size, size, dtype=torch.uint8),
                          return_tensors="pt")
        expanded = int((probe["input_ids"] == vlm.config.image_token_id).sum())
    if expanded != tokens_per_image:
        raise ExportError(f"the processor expands an image to {expanded} tokens, the vision tower makes {tokens_per_image}")

    if tiled:
        expand = idefics3.expansion(processor, vlm, settings, tokens_per_image)
    else:
        expand = expansion(processor, vlm, size, tokens_per_image)

    model = text_model(vlm)
    hidden = int(model.config.hidden_size)
    one_row = decode_gemv.wrap(model)
    one_row_kernel = decode_gemv.one_row_kernel()
    lm.StepState.attention_in_float32 = False
    lm.register_attention()
    transformers.AttentionInterface.register(IMAGE_ATTENTION, image_block_attention)
    model.set_attn_implementation(IMAGE_ATTENTION if bidirectional(vlm) else lm.ATTENTION)
    layout = lm.shapes(model)
    layers, heads, kv_heads, head_dim = layout
    limit = lm.max_positions(model.config)
    max_context = min(max_context or limit or 2048, limit or max_context or 2048)
    os.makedirs(out_dir, exist_ok=True)

    step = step_module(model, bidirectional(vlm))
    g = torch.Generator().manual_seed(0)
    # One image (Idefics3: of two frames).
    pixels = torch.randn(2 if tiled else 1, 3, size, size, generator=g)
    ids = check_ids(vlm.config, tokens_per_image * pixels.shape[0])
    check("self-check (eager step)", step, vision, layout, hidden, vlm, pixels, ids, log)

    log("vision.pt: torch.jit.trace of the vision tower and projector; preprocess.pt: torch.jit.script")
    with torch.no_grad():
        traced = torch.jit.trace(vision, (torch.randn(2, 3, size, size, generator=g),), check_trace=False)
    traced.save(os.path.join(out_dir, "vision.pt"))
    scripted = idefics3.Preprocess(torch, settings) if tiled else Preprocess(torch, settings)
    torch.jit.script(scripted).save(os.path.join(out_dir, "preprocess.pt"))
    pixels_diff = idefics3.check_pixels(processor, torch.jit.load(os.path.join(out_dir, "preprocess.pt")),
                                        log) if tiled else None
    vision_run = torch.jit.load(os.path.join(out_dir, "vision.pt"))
    with torch.no_grad():
        px = torch.randn(3, 3, size, size, generator=g)
        vision_diff = (vision_run(px) - vision(px)).abs().max().item()
    if not vision_diff <= 1e-4:
        raise ExportError(f"vision.pt differs from the eager tower by {vision_diff:.3g} (> 1e-4)")

    started = time.time()
    package = os.path.join(out_dir, "model.pt2")
    log(f"model.pt2: torch.export + AOTInductor compile, {lm.compile_estimate(model, None, False)} (no output until it ends)")
    export_program(layout, step, hidden, max_context, max_batch, package, compile_options)
    log(f"model.pt2: torch.export + AOTInductor in {time.time() - started:.0f} s")
    runner = torch._inductor.aoti_load_package(package)
    worst = check("compiled check (model.pt2 + vision.pt)", lambda *a: runner(*a), vision_run, layout, hidden, vlm,
                  pixels, ids, log)
    model.set_attn_implementation("sdpa")
    # (the default again: models/make_vlm_models.py's goldens run the same model object)

    vision_manifest = {
        "program": "vision.pt",
        "programFormat": "torchscript",
        "preprocess": "preprocess.pt",
        "imageProcessor": settings,
        "imageSize": size,
        "imageToken": processor.image_token,
        "imageTokenId": int(vlm.config.image_token_id),
        "tokensPerImage": tokens_per_image,
        "expansion": expand,
        "bidirectionalImages": bidirectional(vlm),
        "hidden": hidden,
        "visionFeatureLayer": getattr(vlm.config, "vision_feature_layer", None),
        "visionFeatureSelectStrategy": getattr(vlm.config, "vision_feature_select_strategy", None),
        "checkedMaxAbsDiff": vision_diff,
        "checkedPixelsMaxAbsDiff": pixels_diff,
        "tiled": tiled,
    }
    return write_manifest(vlm, model, processor, model_dir, out_dir, layout, max_context, max_batch, one_row,
                          one_row_kernel, worst, architecture, vision_manifest)


def export_mrope(vlm, processor, out_dir, model_dir, max_context, max_batch, log, compile_options):
    """export() for Qwen2-VL (vlm_qwen2.py): per-image grids, one image a vision call, M-RoPE."""
    import torch

    import decode_gemv

    architecture = type(vlm).__name__
    settings = qwen2.settings(processor)
    expand = qwen2.expansion(processor, vlm)
    vision = qwen2.vision_module(vlm)
    model = qwen2.TextLM(vlm)
    hidden = int(model.config.hidden_size)
    one_row = decode_gemv.wrap(model)
    one_row_kernel = decode_gemv.one_row_kernel()
    lm.StepState.attention_in_float32 = False
    lm.register_attention()
    model.set_attn_implementation(lm.ATTENTION)
    layout = lm.shapes(model)
    limit = lm.max_positions(model.config)
    max_context = min(max_context or limit or 2048, limit or max_context or 2048)
    os.makedirs(out_dir, exist_ok=True)
    step = qwen2.step_module(model)
    qwen2.check("self-check (eager step)", step, vision, layout, hidden, vlm, processor, log, lm.FP32_TOLERANCE)

    log("vision.pt: torch.jit.trace of the vision tower and merger; preprocess.pt: torch.jit.script")
    vision_diff = qwen2.trace_vision(vision, processor, os.path.join(out_dir, "vision.pt"), log)
    torch.jit.script(qwen2.Preprocess(torch, settings)).save(os.path.join(out_dir, "preprocess.pt"))
    pixels_diff = qwen2.check_pixels(processor, torch.jit.load(os.path.join(out_dir, "preprocess.pt")), log)

    started = time.time()
    package = os.path.join(out_dir, "model.pt2")
    log(f"model.pt2: torch.export + AOTInductor compile, {lm.compile_estimate(model, None, False)} (no output until it ends)")
    export_program(layout, step, hidden, max_context, max_batch, package, compile_options, mrope=True)
    log(f"model.pt2: torch.export + AOTInductor in {time.time() - started:.0f} s")
    runner = torch._inductor.aoti_load_package(package)
    worst = qwen2.check("compiled check (model.pt2 + vision.pt)", lambda *a: runner(*a),
                        torch.jit.load(os.path.join(out_dir, "vision.pt")), layout, hidden, vlm, processor, log,
                        lm.FP32_TOLERANCE)
    model.set_attn_implementation("sdpa")
    vision_manifest = qwen2.manifest_vision(processor, settings, expand, hidden, vision_diff, pixels_diff, vlm)
    return write_manifest(vlm, model, processor, model_dir, out_dir, layout, max_context, max_batch, one_row,
                          one_row_kernel, worst, architecture, vision_manifest, extra_inputs=["rope"])


def write_manifest(vlm, model, processor, model_dir, out_dir, layout, max_context, max_batch, one_row,
                   one_row_kernel, worst, architecture, vision_manifest, extra_inputs=()):
    """The tokenizer files, generation_config.json and manifest.json; returns the manifest."""
    layers, heads, kv_heads, head_dim = layout
    tokenizer = lm.write_tokenizer(model_dir, out_dir)
    template = getattr(processor, "chat_template", None) or getattr(tokenizer, "chat_template", None)
    if template:
        tokenizer.chat_template = template
        tokenizer.save_pretrained(out_dir)
    vlm.generation_config.save_pretrained(out_dir)
    cache = [f"past.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    manifest = {
        "kind": "causal-lm",
        "format": 1,
        "program": "model.pt2",
        "architecture": type(vlm).__name__,
        "source": "transformers",
        "model_type": vlm.config.model_type,
        "dtype": "float32",
        "vocab_size": model.config.vocab_size,
        "layers": layers,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "max_context": max_context,
        "max_batch": max_batch,
        "autotuned": False,
        "one_row_layers": one_row,
        "one_row_kernel": one_row_kernel if one_row else None,
        "kernels": lm.kernels(None, one_row_kernel if one_row else None, "float32"),
        "compiled_for": lm.compiled_for(),
        "dtype_reason": "float32 (the only dtype export_vlm.py makes)",
        "quantization": None,
        "check": {"max_logit_difference": float(f"{worst:.3g}"), "tolerance": lm.FP32_TOLERANCE,
                  "basis": f"fp32 tolerance, a prompt with one image against {architecture}"},
        "unused_constants": [],
        "sliding_window": lm.sliding_window(model.config),
        "eos_token_ids": lm.eos_ids(model, tokenizer),
        "bos_token_id": tokenizer.bos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "chat_template": bool(template),
        "inputs": ["input_ids", "positions", "image_embeds", "image_mask", *extra_inputs, *cache],
        "outputs": ["logits"],
        "cache": {
            "layout": ["batch", "kv_heads", "context", "head_dim"],
            "dtype": "float32",
            "attention_dtype": "float32",
            "update": "in place at positions[b, t]; token (b, t) attends to slots 0..=positions[b, t]",
        },
        "vision": vision_manifest,
    }
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir")
    p.add_argument("out_dir")
    p.add_argument("--max-context", type=int, default=None, help="longest sequence (default: the model's)")
    p.add_argument("--max-batch", type=int, default=64, help="most sequences in one step")
    args = p.parse_args(argv)
    missing = lm.missing_packages()
    if missing:
        print(f"export_vlm: missing Python packages: {', '.join(missing)} "
              f"(install: {sys.executable} -m pip install {' '.join(missing)})", file=sys.stderr)
        return 3
    try:
        export(args.model_dir, args.out_dir, args.max_context, args.max_batch)
    except ExportError as e:
        print(f"export_vlm: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
