#!/usr/bin/env python3
"""Tiny random-weight LLaVA, Gemma 3 and SmolVLM folders and their goldens for torch.text.CausalLM's
image tests.

    .libtorch/bin/python models/make_vlm_models.py [--out models/golden/vlm]

Writes (generated, under models/golden/, which git ignores):

  vlm/llava-tiny-src/       a Hugging Face folder: LlavaForConditionalGeneration (a 2-layer CLIP
                            vision tower on 32x32 images in 8x8 patches, a 2-layer Llama), seeded
                            random weights; make_lm_models.py's tokenizer with an <image> token,
                            a CLIPImageProcessor and a ChatML chat template with image parts
  vlm/llava-tiny/           that folder exported by python/export_vlm.py
  vlm/llava-tiny.golden.json  per case: the processor's input_ids and pixel_values (float32, each
                            image), and transformers' generate(do_sample=False) new ids and the
                            top-2 logit gap at each step

  vlm/gemma3-tiny*, vlm/smolvlm-tiny*   the same for Gemma3ForConditionalGeneration and
                            SmolVLMForConditionalGeneration (SmolVLM's processor settings and chat
                            template, shrunk: 32-pixel tiles, longest edge 128); vlm/smolvlm-images/
                            the extra test images (a portrait one and one smaller than a tile);
                            gemma3-tiny.golden.json's "pipeline": transformers'
                            pipeline('image-text-to-text') answers to the same chats

Remade only when this script, python/ or the tokenizer changed (llava-tiny/.source-hash).
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
NEW_TOKENS = 24
MAX_CONTEXT = 256
NAME = "llava-tiny"
TOKENIZER = os.path.join(HERE, "golden", "lm", "tokenizer")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CASES = [
    {"name": "one image", "images": ["chelsea.png"],
     "messages": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in the picture?"}]}]},
    {"name": "two images", "images": ["coffee.png", "chelsea.png"],
     "messages": [{"role": "user", "content": [{"type": "text", "text": "Compare "}, {"type": "image"},
                                               {"type": "text", "text": " and "}, {"type": "image"}]}]},
    {"name": "text only", "images": [],
     "messages": [{"role": "user", "content": "Tell me a story about the sea."}]},
]
FIXTURE_COMPILE = {"aot_inductor.compile_wrapper_opt_level": "O0"}
GEMMA3 = "gemma3-tiny"
# Gemma 3's chat template, cut to what the fixture's chats use: an image part writes
# <start_of_image>, which Gemma3Processor expands to "\n\n<start_of_image>" + N soft tokens +
# "<end_of_image>\n\n".
GEMMA3_TEMPLATE = (
    "{% for message in messages %}<start_of_turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<start_of_image>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
SMOLVLM = "smolvlm-tiny"
# SmolVLM's chat template (HuggingFaceTB/SmolVLM-256M-Instruct's, without its video branch).
SMOLVLM_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
SMOLVLM_SPECIALS = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>",
                    *(f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7))]
# SmolVLM's cases: several sizes and aspect ratios (3 x 4 tiles, a portrait 4 x 2, one smaller than
# a 32-pixel tile: 3 x 4 after the resize to the longest edge), text-only chats (the template reads
# message['content'][0]['type']: a list of parts).
SMOLVLM_CASES = [
    {"name": "one image", "images": ["chelsea.png"],
     "messages": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in the picture?"}]}]},
    {"name": "two images", "images": ["coffee.png", "smolvlm-images/tall.png"],
     "messages": [{"role": "user", "content": [{"type": "text", "text": "Compare "}, {"type": "image"},
                                               {"type": "text", "text": " and "}, {"type": "image"}]}]},
    {"name": "small image", "images": ["smolvlm-images/small.png"],
     "messages": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]}]},
    {"name": "text only", "images": [],
     "messages": [{"role": "user", "content": [{"type": "text", "text": "Tell me a story about the sea."}]}]},
    # A string content: the template's loop over it writes nothing (in transformers too), the prompt
    # is the turn's frame alone. torch.text.CausalLM joins a message of text parts into a string
    # before the template sees it, so only this text-only case runs through it (the list one: cargo).
    {"name": "text only (string)", "images": [],
     "messages": [{"role": "user", "content": "Tell me a story about the sea."}]},
]
SMOLVLM_CONTEXT = 640
GEMMA3_SPECIALS = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}


def log(message):
    print(f"make_vlm_models.py: {message}", flush=True)


def source_hash():
    h = hashlib.sha256()
    for path in [__file__, os.path.join(TOKENIZER, "tokenizer.json")] + sorted(
            os.path.join(ROOT, "python", f) for f in os.listdir(os.path.join(ROOT, "python")) if f.endswith(".py")):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def make_source(folder):
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(TOKENIZER)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    image_id = tokenizer.convert_tokens_to_ids("<image>")
    text = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=MAX_CONTEXT, tie_word_embeddings=True,
        initializer_range=0.5, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    vision = transformers.CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32,
        patch_size=8, projection_dim=32)
    config = transformers.LlavaConfig(vision_config=vision, text_config=text, image_token_id=image_id,
                                      vision_feature_layer=-2, vision_feature_select_strategy="default",
                                      projector_hidden_act="gelu", tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.LlavaForConditionalGeneration(config).eval()
    with torch.no_grad():  # a wide spread, so that greedy steps have clear winners
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.5 if "language_model" in name or "lm_head" in name else 0.2)
    model.generation_config = transformers.GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                                            do_sample=False)
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder)
    images = transformers.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = transformers.LlavaProcessor(image_processor=images, tokenizer=tokenizer, patch_size=8,
                                            vision_feature_select_strategy="default", num_additional_image_tokens=1,
                                            chat_template=CHAT_TEMPLATE)
    processor.save_pretrained(folder)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)


def make_gemma3_source(folder):
    """Gemma3ForConditionalGeneration: a 2-layer SigLIP tower on 32x32 images in 4x4 patches (64
    patches, average-pooled 2x2 to 16 image tokens), a 2-layer Gemma 3 decoder (one sliding layer
    with an 8-token window, one full), seeded random weights."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(TOKENIZER)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>",
                                                                *GEMMA3_SPECIALS.values()]})
    tokenizer = transformers.AutoTokenizer.from_pretrained(_saved(tokenizer, folder), extra_special_tokens=GEMMA3_SPECIALS)
    ids = {k: tokenizer.convert_tokens_to_ids(v) for k, v in GEMMA3_SPECIALS.items()}
    eot = tokenizer.convert_tokens_to_ids("<end_of_turn>")
    text = transformers.Gemma3TextConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=MAX_CONTEXT, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=16, initializer_range=0.5,
        bos_token_id=1, eos_token_id=[2, eot], pad_token_id=0)
    vision = transformers.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=2, image_size=32, patch_size=4)
    config = transformers.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=16,
                                       boi_token_index=ids["boi_token"], eoi_token_index=ids["eoi_token"],
                                       image_token_index=ids["image_token"], tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():  # a wide spread, so that greedy steps have clear winners
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.5 if "language_model" in name or "lm_head" in name else 0.2)
            elif "norm" in name and "language_model" in name:
                p.normal_(0, 1.0)
        # Gemma scales the embeddings by sqrt(hidden): narrower rows, or the residual stream is
        # the token's own row and greedy repeats the prompt's last token.
        model.model.language_model.embed_tokens.weight.normal_(0, 0.05)
    model.generation_config = transformers.GenerationConfig(bos_token_id=1, eos_token_id=[2, eot], pad_token_id=0,
                                                            do_sample=False)
    model.save_pretrained(folder)
    images = transformers.Gemma3ImageProcessor(size={"height": 32, "width": 32})
    processor = transformers.Gemma3Processor(image_processor=images, tokenizer=tokenizer, image_seq_length=16,
                                             chat_template=GEMMA3_TEMPLATE)
    processor.save_pretrained(folder)
    tokenizer.chat_template = GEMMA3_TEMPLATE
    tokenizer.save_pretrained(folder)


def make_smolvlm_source(folder):
    """SmolVLMForConditionalGeneration: a 2-layer SigLIP-like tower on 32x32 tiles in 4x4 patches
    (64 patches, pixel-shuffled by 2 to 16 image tokens per tile), a 2-layer Llama decoder (SmolLM2's
    family), seeded random weights; SmolVLM's processor (longest edge 4 tiles, image splitting,
    LANCZOS) and chat template."""
    import torch
    import transformers

    import vlm_idefics3

    vlm_idefics3.allow_without_num2words()
    tokenizer = transformers.AutoTokenizer.from_pretrained(TOKENIZER)
    tokenizer.add_special_tokens({"additional_special_tokens": SMOLVLM_SPECIALS})
    tokenizer = transformers.AutoTokenizer.from_pretrained(_saved(tokenizer, folder))
    image_id = tokenizer.convert_tokens_to_ids("<image>")
    eou = tokenizer.convert_tokens_to_ids("<end_of_utterance>")
    text = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=1024, tie_word_embeddings=True,
        initializer_range=0.5, bos_token_id=1, eos_token_id=[2, eou], pad_token_id=0)
    vision = transformers.SmolVLMVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                              num_attention_heads=2, image_size=32, patch_size=4)
    config = transformers.SmolVLMConfig(vision_config=vision, text_config=text, scale_factor=2,
                                        image_token_id=image_id, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.SmolVLMForConditionalGeneration(config).eval()
    with torch.no_grad():  # a wide spread, so that greedy steps have clear winners
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.5 if "text_model" in name or "lm_head" in name else 0.2)
    model.generation_config = transformers.GenerationConfig(bos_token_id=1, eos_token_id=[2, eou], pad_token_id=0,
                                                            do_sample=False)
    model.save_pretrained(folder)
    images = transformers.SmolVLMImageProcessor(size={"longest_edge": 4 * 32}, max_image_size={"longest_edge": 32})
    processor = transformers.SmolVLMProcessor(image_processor=images, tokenizer=tokenizer,
                                              video_processor=transformers.SmolVLMVideoProcessor(),
                                              image_seq_len=16, chat_template=SMOLVLM_TEMPLATE)
    processor.save_pretrained(folder)
    tokenizer.chat_template = SMOLVLM_TEMPLATE
    tokenizer.save_pretrained(folder)


def make_smolvlm_images(out):
    """smolvlm-images/: tall.png (a 60x150 crop of astronaut.png: portrait) and small.png (a 21x15
    crop of chelsea.png: smaller than a 32-pixel tile)."""
    from PIL import Image

    folder = os.path.join(out, "smolvlm-images")
    os.makedirs(folder, exist_ok=True)
    Image.open(os.path.join(HERE, "images", "astronaut.png")).convert("RGB").crop((200, 40, 260, 190)).save(
        os.path.join(folder, "tall.png"))
    Image.open(os.path.join(HERE, "images", "chelsea.png")).convert("RGB").crop((200, 100, 221, 115)).save(
        os.path.join(folder, "small.png"))


def _saved(tokenizer, folder):
    os.makedirs(folder, exist_ok=True)
    tokenizer.save_pretrained(folder)
    return folder


def goldens(folder, cases=CASES, image_dir=None):
    """Per case: the processor's input_ids and pixel_values (each image's own: a tiled image's frames,
    without the zero frames that pad a batch, and its grid), transformers' greedy new ids."""
    import torch
    import transformers
    from PIL import Image

    import vlm_idefics3

    vlm_idefics3.allow_without_num2words()  # SmolVLMProcessor: only its video prompts use num2words
    model = transformers.AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    processor = transformers.AutoProcessor.from_pretrained(folder)
    tiled = model.config.model_type == "smolvlm"
    done = []
    for case in cases:
        paths = [os.path.join(image_dir if n.startswith("smolvlm-images/") else os.path.join(HERE, "images"), n)
                 for n in case["images"]]
        images = [Image.open(p).convert("RGB") for p in paths]
        text = processor.apply_chat_template(case["messages"], tokenize=False, add_generation_prompt=True)
        inputs = processor(text=text, images=images or None, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, output_scores=True,
                                 return_dict_in_generate=True)
        ids = inputs["input_ids"][0].tolist()
        new = out.sequences[0, len(ids):].tolist()
        gaps = [float(torch.topk(s[0].float(), 2).values.diff().abs()) for s in out.scores]
        pixels = inputs.get("pixel_values")
        grids = []
        if tiled and images:
            info = processor.image_processor(images=images, return_row_col_info=True)
            grids = [[r, c] for r, c in zip(info["rows"][0], info["cols"][0])]
            counts = [r * c + 1 if r else 1 for r, c in grids]
            pixels = [pixels[0, sum(counts[:i]):sum(counts[:i]) + n] for i, n in enumerate(counts)]
        done.append({**case, "text": text, "input_ids": ids, "output_ids": new, "top2_gaps": gaps,
                     "image_tokens": ids.count(model.config.image_token_id), "grids": grids,
                     "pixel_values": [p.flatten().tolist() for p in pixels] if pixels is not None else [],
                     "pixel_shapes": [list(p.shape) for p in pixels] if pixels is not None else [],
                     "text_out": processor.tokenizer.decode(new, skip_special_tokens=True)})
    return {"new_tokens": NEW_TOKENS, "image_token_id": model.config.image_token_id, "cases": done}


def pipeline_goldens(folder, cases=CASES):
    """transformers' pipeline('image-text-to-text') on each case's chat (image parts as {"type":
    "image", "url": path}), greedy: the assistant turn's text it appends (torch.pipeline's golden)."""
    import torch
    import transformers

    pipe = transformers.pipeline("image-text-to-text", model=folder, dtype=torch.float32)
    done = []
    for case in cases:
        images = iter(os.path.join(HERE, "images", n) for n in case["images"])
        messages = [m if isinstance(m["content"], str) else
                    {"role": m["role"], "content": [{"type": "image", "url": next(images)} if p["type"] == "image"
                                                    else p for p in m["content"]]} for m in case["messages"]]
        out = pipe(text=messages, max_new_tokens=NEW_TOKENS, generate_kwargs={"do_sample": False})
        done.append({"name": case["name"], "generated": out[0]["generated_text"][-1]["content"]})
    return done


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(HERE, "golden", "vlm"))
    p.add_argument("--only", nargs="*", help="make only these (llava-tiny, gemma3-tiny, smolvlm-tiny)")
    args = p.parse_args()
    if not os.path.isfile(os.path.join(TOKENIZER, "tokenizer.json")):
        sys.exit(f"make_vlm_models.py: {TOKENIZER} is missing (make_lm_models.py makes it first)")
    digest = source_hash()
    models = ((NAME, make_source, CASES, MAX_CONTEXT), (GEMMA3, make_gemma3_source, CASES, MAX_CONTEXT),
              (SMOLVLM, make_smolvlm_source, SMOLVLM_CASES, SMOLVLM_CONTEXT))
    only = [m for m in models if not args.only or m[0] in args.only]
    for name, make, cases, context in only:
        src, out = os.path.join(args.out, f"{name}-src"), os.path.join(args.out, name)
        stamp = os.path.join(out, ".source-hash")
        if os.path.isfile(stamp) and open(stamp).read() == digest:
            log(f"{name}: up to date")
            continue
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        make(src)
        if name == SMOLVLM:
            make_smolvlm_images(args.out)
        import export_vlm

        manifest = export_vlm.export(src, out, max_context=context, max_batch=8,
                                     log=lambda m, name=name: log(f"{name}: {m}"), compile_options=FIXTURE_COMPILE)
        worst = manifest["check"]["max_logit_difference"]
        if name == SMOLVLM and not worst <= 1e-4:  # this fixture's stated tolerance (docs/multimodal.md)
            sys.exit(f"make_vlm_models.py: {name}: model.pt2 differs from transformers by {worst} (> 1e-4)")
        golden = goldens(src, cases, args.out)
        if name == GEMMA3:
            golden["pipeline"] = pipeline_goldens(src, cases)
        with open(os.path.join(args.out, f"{name}.golden.json"), "w") as f:
            json.dump(golden, f)
        with open(stamp, "w") as f:
            f.write(digest)
        log(f"{name}: written")


if __name__ == "__main__":
    main()
