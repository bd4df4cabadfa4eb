"""Qwen2-VL for export_vlm.py: its image processor (scripted), its vision tower (one image a call,
the rotary positions as an input) and its decoder step with M-RoPE positions.

The image processor (Qwen2VLImageProcessor, transformers 5's torchvision backend) resizes each
image to a multiple of patch_size x merge_size in both sides with about as many pixels as it had,
within [min_pixels, max_pixels] (smart_resize), rescales and normalizes it, and cuts it into
patch_size patches, each repeated temporal_patch_size times (an image is one frame of a video) and
flattened: pixel_values [gh * gw, 3 * temporal_patch_size * patch_size^2] in merge-block order
(the merge_size x merge_size blocks row by row, the patches of each block row by row), and
image_grid_thw [1, gh, gw]. The processor writes gh * gw / merge_size^2 `<|image_pad|>` tokens for
the chat template's one.

preprocess.pt returns float32 [gh, gw, 3 * temporal_patch_size * patch_size^2]: the processor's
pixel_values with the grid as its first two dimensions (reshaped, not re-laid-out: row-major it is
pixel_values as the processor orders it).

vision.pt takes one image, `pixel_values [gh * gw, D]` and `position_ids [gh * gw, 2]` (each patch's
row and column: transformers' get_vision_position_ids, which vision.rs computes), and returns its
gh * gw / merge^2 image-token embeddings: Qwen2VisionTransformerPretrainedModel's pooler output,
one image a call, so that its attention is the whole sequence (transformers' cu_seqlens split).

The decoder step takes `rope [3, B, T]` after the image mask: each token's (temporal, height,
width) position (transformers' get_rope_index); `positions` stays the cache slot.
"""
from export_causal_lm import ExportError

ARCHITECTURES = ("Qwen2VLForConditionalGeneration",)
MODEL_TYPES = ("qwen2_vl",)
RESAMPLE = {2: "bilinear", 3: "bicubic"}


def is_qwen2(vlm):
    return vlm.config.model_type in MODEL_TYPES


def settings(processor):
    """The image processor's resolved settings (manifest.json's vision.imageProcessor)."""
    p = processor.image_processor
    name = type(p).__name__
    size = dict(p.size or {})
    if not p.do_resize:
        raise ExportError(f"{name}: do_resize off (the patch grid needs the resize to multiples of the patch)")
    resample = int(p.resample) if p.resample is not None else 3
    if resample not in RESAMPLE:
        raise ExportError(f"{name}: resample {p.resample} is not bilinear or bicubic")
    as3 = lambda v: [float(x) for x in (v if isinstance(v, (list, tuple)) else [v] * 3)]  # noqa: E731
    return {
        "processor": name,
        "minPixels": int(size["shortest_edge"]),
        "maxPixels": int(size["longest_edge"]),
        "patchSize": int(p.patch_size),
        "temporalPatchSize": int(p.temporal_patch_size),
        "mergeSize": int(p.merge_size),
        "resample": RESAMPLE[resample],
        "doRescale": bool(p.do_rescale),
        "rescaleFactor": float(p.rescale_factor),
        "doNormalize": bool(p.do_normalize),
        "imageMean": as3(p.image_mean) if p.image_mean is not None else None,
        "imageStd": as3(p.image_std) if p.image_std is not None else None,
    }


def Preprocess(torch, s):
    """The processor for one uint8 [3, h, w] image, scripted -> [gh, gw, D]."""
    import math

    from export_common import image_processor_base

    F = torch.nn.functional

    class ImageProcessor(image_processor_base(torch, s)):
        def __init__(self):
            super().__init__()
            self.patch, self.merge, self.temporal = s["patchSize"], s["mergeSize"], s["temporalPatchSize"]
            self.min_pixels, self.max_pixels, self.mode = s["minPixels"], s["maxPixels"], s["resample"]

        def round_even(self, x: float) -> int:
            # Python's round(): half to even.
            f = math.floor(x)
            d = x - f
            if d > 0.5 or (d == 0.5 and f % 2 == 1):
                return int(f) + 1
            return int(f)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = image.unsqueeze(0)
            height, width = x.shape[-2], x.shape[-1]
            if max(height, width) / min(height, width) > 200:
                raise ValueError("absolute aspect ratio must be smaller than 200")
            factor = self.patch * self.merge
            # smart_resize
            h = self.round_even(height / factor) * factor
            w = self.round_even(width / factor) * factor
            if h * w > self.max_pixels:
                beta = math.sqrt((height * width) / self.max_pixels)
                h = max(factor, int(math.floor(height / beta / factor)) * factor)
                w = max(factor, int(math.floor(width / beta / factor)) * factor)
            elif h * w < self.min_pixels:
                beta = math.sqrt(self.min_pixels / (height * width))
                h = int(math.ceil(height * beta / factor)) * factor
                w = int(math.ceil(width * beta / factor)) * factor
            if h != height or w != width:
                x = F.interpolate(x, size=[h, w], mode=self.mode, align_corners=False, antialias=True)
            x = self.finish(x[0])
            p, m = self.patch, self.merge
            gh, gw = h // p, w // p
            patches = x.reshape(3, gh // m, m, p, gw // m, m, p).permute(1, 4, 2, 5, 0, 3, 6)
            flat = patches.unsqueeze(5).expand(-1, -1, -1, -1, -1, self.temporal, -1, -1)
            return flat.reshape(gh, gw, 3 * self.temporal * p * p)

    return ImageProcessor().eval()


def vision_module(vlm):
    """(pixel_values [N, D], position_ids [N, 2]) of one image -> [N / merge^2, hidden]: the tower
    with its attention over the whole image (transformers splits the packed images by cu_seqlens;
    one image is one split)."""
    import torch
    from transformers.models.qwen2_vl.modeling_qwen2_vl import apply_rotary_pos_emb_vision

    class Vision(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = vlm.model.visual

        def forward(self, pixel_values, position_ids):
            v = self.visual
            h = v.patch_embed(pixel_values)
            cos, sin = v.rotary_pos_emb(h, position_ids)
            for blk in v.blocks:
                a = blk.attn
                x = blk.norm1(h)
                q, k, val = a.qkv(x).reshape(-1, 3, a.num_heads, a.head_dim).permute(1, 0, 2, 3).unbind(0)
                q, k = apply_rotary_pos_emb_vision(q, k, cos, sin)
                out = torch.nn.functional.scaled_dot_product_attention(
                    q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
                    val.transpose(0, 1).unsqueeze(0), scale=a.scaling)
                h = h + a.proj(out[0].transpose(0, 1).reshape(-1, a.dim))
                h = h + blk.mlp(blk.norm2(h))
            return v.merger(h).float()

    return Vision().eval()


def patch_positions(gh, gw, merge):
    """transformers' get_vision_position_ids for one image: [gh * gw, 2] (row, column) in
    merge-block order (vision.rs computes the same)."""
    import torch

    rows, cols = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    shape = (gh // merge, merge, gw // merge, merge)
    return torch.stack([rows.reshape(shape).transpose(1, 2).flatten(),
                        cols.reshape(shape).transpose(1, 2).flatten()], -1)


class TextLM:
    """The VLM's decoder and head as the causal LM export_causal_lm's helpers take (transformers
    has no causal-LM class for Qwen2-VL's text config): same tensors, nothing copied."""

    def __new__(cls, vlm):
        import types

        import torch

        class Text(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model, self.lm_head = vlm.model.language_model, vlm.lm_head
                self.config, self.generation_config = vlm.config.text_config, vlm.generation_config

            @property
            def base_model(self):
                return self.model

            def get_input_embeddings(self):
                return self.model.embed_tokens

            def get_output_embeddings(self):
                return self.lm_head

            def set_attn_implementation(self, name):
                self.model.set_attn_implementation(name)

            def forward(self, input_ids=None, inputs_embeds=None, position_ids=None, past_key_values=None,
                        use_cache=True, logits_to_keep=1, **kwargs):
                out = self.model(input_ids=input_ids, inputs_embeds=inputs_embeds, position_ids=position_ids,
                                 past_key_values=past_key_values, use_cache=use_cache)
                states = out.last_hidden_state
                if isinstance(logits_to_keep, int):
                    states = states[:, -logits_to_keep:]
                else:
                    states = states[:, logits_to_keep]
                return types.SimpleNamespace(logits=self.lm_head(states))

        return Text().eval()


def step_module(model):
    """export_vlm's step with `rope [3, B, T]`, the M-RoPE positions, after the image mask."""
    import torch

    import export_causal_lm as lm

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = model

        def forward(self, input_ids, positions, image_embeds, image_mask, rope, *cache):
            embeds = self.lm.get_input_embeddings()(torch.where(image_mask, 0, input_ids))
            embeds = torch.where(image_mask.unsqueeze(-1), image_embeds.to(embeds.dtype), embeds)
            lm.StepState.positions = positions
            try:
                out = self.lm(inputs_embeds=embeds, position_ids=rope,
                              past_key_values=lm.CallerCache(list(cache), positions), use_cache=True,
                              logits_to_keep=1)
            finally:
                lm.StepState.positions = None
            return out.logits[:, -1].float()

    return Step().eval()


def rope_index(ids, image_id, grids, merge):
    """transformers' get_rope_index for one row (images only): [3, T] and the row's delta."""
    import torch

    out, current, k, t = [], 0, 0, 0
    while t < len(ids):
        if ids[t] != image_id:
            out.append(torch.full((3, 1), current))
            current, t = current + 1, t + 1
            continue
        gh, gw = grids[k][1] // merge, grids[k][2] // merge
        rows, cols = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
        out.append(torch.stack([torch.zeros(gh * gw, dtype=torch.long), rows.flatten(), cols.flatten()]) + current)
        current, t, k = current + max(gh, gw), t + gh * gw, k + 1
    positions = torch.cat(out, 1)
    return positions, int(positions.max()) + 1 - len(ids)


def expansion(processor, vlm):
    """The template's image token, expanded per image to its grid's count (vision.rs): checked on
    probe chats that the template's ids with each `<|image_pad|>` repeated N times are the
    processor's input_ids."""
    import torch

    tokenizer = processor.tokenizer
    token = processor.image_token
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id != int(vlm.config.image_token_id):
        raise ExportError(f"the processor's image token {token!r} is not the model's image_token_id")
    encode = lambda t: tokenizer(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    merge = processor.image_processor.merge_size
    factor = processor.image_processor.patch_size * merge
    for parts in ([{"type": "text", "text": "Look: "}, {"type": "image"}, {"type": "text", "text": " What?"},
                   {"type": "image"}],
                  [{"type": "image"}, {"type": "text", "text": "What is it?"}]):
        text = processor.apply_chat_template([{"role": "user", "content": parts}], tokenize=False,
                                             add_generation_prompt=True)
        plain = encode(text)
        count = sum(p["type"] == "image" for p in parts)
        if plain.count(token_id) != count:
            raise ExportError(f"the chat template writes {plain.count(token_id)} '{token}' tokens for {count} image(s)")
        images = [torch.zeros(3, factor * (2 + i), factor * (3 - i) + 5, dtype=torch.uint8) for i in range(count)]
        out = processor(text=text, images=images, add_special_tokens=False, return_tensors="pt")
        grids = out["image_grid_thw"].tolist()
        want, k = [], 0
        for t in plain:
            n = 1
            if t == token_id:
                n, k = grids[k][0] * grids[k][1] * grids[k][2] // merge**2, k + 1
            want += [t] * n
        if out["input_ids"][0].tolist() != want:
            raise ExportError(f"the processor's input_ids are not the template's with '{token}' repeated per image")
    return {"templateToken": token, "templateTokenId": token_id, "text": None, "tokenLevel": True,
            "perImage": "qwen2-grid"}


def check_pixels(processor, preprocess, log):
    """preprocess.pt against the processor's pixel_values and image_grid_thw on random images of
    several sizes (under min_pixels, over max_pixels, a half-way rounding): max difference."""
    import torch

    p = processor.image_processor
    factor = p.patch_size * p.merge_size
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for h, w in ((factor // 2 + 1, factor // 3 + 2), (2 * factor + factor // 2, factor * 3),
                 (factor * 9 + 3, factor * 7), (5, 4 * factor + 1)):
        image = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)
        want = p(images=[image], return_tensors="pt")
        got = preprocess(image)
        grid = want["image_grid_thw"][0].tolist()
        if [1, *got.shape[:2]] != grid or got.reshape(-1, got.shape[-1]).shape != want["pixel_values"].shape:
            raise ExportError(f"preprocess.pt: a {h}x{w} image makes {list(got.shape)}, the processor {grid} "
                              f"{list(want['pixel_values'].shape)}")
        worst = max(worst, (got.reshape(-1, got.shape[-1]) - want["pixel_values"]).abs().max().item())
    log(f"preprocess.pt vs {type(p).__name__} on 4 image sizes: max difference {worst:.2g}")
    if not worst <= 1e-6:
        raise ExportError(f"preprocess.pt differs from the processor by {worst:.3g} (> 1e-6)")
    return worst


def check_input(vlm, processor):
    """A prompt [1, T] (3 random tokens, one image's tokens, 4 random tokens), the image's
    pixel_values [N, D] and grid [1, gh, gw]: a 3 x 5 merge-block image (non-square)."""
    import torch

    p = processor.image_processor
    m = p.merge_size
    gh, gw = 3 * m, 5 * m
    g = torch.Generator().manual_seed(0)
    pixels = torch.randn(gh * gw, 3 * p.temporal_patch_size * p.patch_size ** 2, generator=g)
    vocab = vlm.config.text_config.vocab_size
    specials = {vlm.config.image_token_id, vlm.config.video_token_id}
    pick = lambda n: torch.tensor([[t if t not in specials else 0 for t in torch.randint(0, vocab, (n,), generator=g).tolist()]])  # noqa: E731,E501
    ids = torch.cat([pick(3), torch.full((1, gh * gw // m**2), vlm.config.image_token_id), pick(4)], 1)
    return ids, pixels, [1, gh, gw]


def check(what, step, vision, layout, hidden, vlm, processor, log, tolerance):
    """The program (prefill of a prompt with one image at its M-RoPE positions, then two greedy
    decodes at slot + delta) against transformers' forward on the same tokens: max logit difference."""
    import torch

    import export_causal_lm as lm

    ids, pixels, grid = check_input(vlm, processor)
    merge = processor.image_processor.merge_size
    image_id = vlm.config.image_token_id
    with torch.no_grad():
        features = vision(pixels, patch_positions(grid[1], grid[2], merge))
        mask = ids == image_id
        embeds = torch.zeros(1, ids.shape[1], hidden)
        embeds[mask] = features
        rope, delta = rope_index(ids[0].tolist(), image_id, [grid], merge)
        cache = lm.new_cache(layout, 1, ids.shape[1] + 4, torch.float32)
        got = [step(ids, torch.arange(ids.shape[1]).view(1, -1), embeds, mask, rope.unsqueeze(1), *cache)]
        seq = ids
        for _ in range(2):
            token = got[-1].argmax(-1).view(1, 1)
            seq = torch.cat([seq, token], 1)
            at = torch.tensor([[seq.shape[1] - 1]])
            got.append(step(token, at, torch.zeros(1, 1, hidden), torch.zeros(1, 1, dtype=torch.bool),
                            (at + delta).expand(3, 1, 1).contiguous(), *cache))
        text = vlm.model.language_model
        own = text.config._attn_implementation
        text.set_attn_implementation("sdpa")
        try:
            want = vlm(input_ids=seq, pixel_values=pixels, image_grid_thw=torch.tensor([grid]),
                       mm_token_type_ids=(seq == image_id).int()).logits[0, -3:].float()
        finally:
            text.set_attn_implementation(own)
    worst = (torch.cat(got) - want).abs().max().item()
    log(f"{what}: vs transformers' {type(vlm).__name__}, a prefill with one image and two decodes: "
        f"max logit difference {worst:.2g} (tolerance {tolerance:g})")
    if not worst <= tolerance:
        raise ExportError(f"{what}: the exported program does not match transformers (max logit difference {worst:.3g})")
    return worst


def trace_vision(vision, processor, path, log):
    """vision.pt: traced on one image's shapes, checked on another grid against the eager tower."""
    import torch

    p = processor.image_processor
    m, d = p.merge_size, 3 * p.temporal_patch_size * p.patch_size ** 2
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        traced = torch.jit.trace(vision, (torch.randn(4 * m * m, d, generator=g), patch_positions(2 * m, 2 * m, m)),
                                 check_trace=False)
        traced.save(path)
        loaded = torch.jit.load(path)
        worst = 0.0
        for gh, gw in ((m, 3 * m), (5 * m, 2 * m)):
            px, pos = torch.randn(gh * gw, d, generator=g), patch_positions(gh, gw, m)
            worst = max(worst, (loaded(px, pos) - vision(px, pos)).abs().max().item())
    log(f"vision.pt vs the eager tower on 2 other grids: max difference {worst:.2g}")
    if not worst <= 1e-4:
        raise ExportError(f"vision.pt differs from the eager tower by {worst:.3g} (> 1e-4)")
    return worst


def manifest_vision(processor, settings_, expand, hidden, vision_diff, pixels_diff, vlm):
    """manifest.json's vision for Qwen2-VL."""
    p = processor.image_processor
    return {
        "program": "vision.pt",
        "programFormat": "torchscript",
        "preprocess": "preprocess.pt",
        "imageProcessor": settings_,
        "imageSize": 0,
        "imageToken": processor.image_token,
        "imageTokenId": int(vlm.config.image_token_id),
        "tokensPerImage": 0,
        "expansion": expand,
        "bidirectionalImages": False,
        "hidden": hidden,
        "checkedMaxAbsDiff": vision_diff,
        "checkedPixelsMaxAbsDiff": pixels_diff,
        "tiled": False,
        "mrope": {"mergeSize": int(p.merge_size), "patchSize": int(p.patch_size),
                  "patchDim": 3 * int(p.temporal_patch_size) * int(p.patch_size) ** 2,
                  "mropeSection": list(vlm.config.text_config.rope_parameters["mrope_section"])},
    }
