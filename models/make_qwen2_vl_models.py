#!/usr/bin/env python3
"""A tiny random-weight Qwen2-VL folder and its goldens for torch.text.CausalLM's M-RoPE tests.

    .libtorch/bin/python models/make_qwen2_vl_models.py [--out models/golden/vlm]

Writes (generated, under models/golden/, which git ignores):

  vlm/qwen2-vl-tiny-src/      a Hugging Face folder: Qwen2VLForConditionalGeneration (a 2-block
                              vision tower in 4x4 patches, temporal patch 2, merge 2; a 2-layer
                              decoder with mrope_section [2, 3, 3]), seeded random weights;
                              make_lm_models.py's tokenizer with Qwen2-VL's special tokens, the
                              real processor settings scaled down (min_pixels 16^2, max_pixels
                              64^2: factor 8 where the real one is 28) and Qwen2-VL's chat
                              template without its default system turn
  vlm/qwen2-vl-tiny/          that folder exported by python/export_vlm.py
  vlm/qwen2-vl-tiny.golden.json  per case: the processor's input_ids, pixel_values (float32, each
                              image's), image_grid_thw, transformers' get_rope_index positions and
                              delta, and generate(do_sample=False) new ids and top-2 logit gaps

Remade only when this script, python/ or the tokenizer changed (qwen2-vl-tiny/.source-hash).
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
NAME = "qwen2-vl-tiny"
NEW_TOKENS = 24
MAX_CONTEXT = 512
TOKENIZER = os.path.join(HERE, "golden", "lm", "tokenizer")
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
# Qwen2-VL-Instruct's chat template, cut to what the cases use (no default system turn, no video).
TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for content in message['content'] %}{% if content['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'text' %}{{ content['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CASES = [
    {"name": "one image", "images": ["chelsea.png"],
     "messages": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in the picture?"}]}]},
    {"name": "two images", "images": ["coffee.png", "qwen2-vl-images/tall.png"],
     "messages": [{"role": "user", "content": [{"type": "text", "text": "Compare "}, {"type": "image"},
                                               {"type": "text", "text": " and "}, {"type": "image"}]}]},
    {"name": "text only", "images": [],
     "messages": [{"role": "user", "content": "Tell me a story about the sea."}]},
]
FIXTURE_COMPILE = {"aot_inductor.compile_wrapper_opt_level": "O0"}


def log(message):
    print(f"make_qwen2_vl_models.py: {message}", flush=True)


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
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIALS})
    os.makedirs(folder, exist_ok=True)
    tokenizer.save_pretrained(folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    eos = [2, ids["<|im_end|>"]]
    text = {"vocab_size": len(tokenizer), "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": MAX_CONTEXT,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            "bos_token_id": 1, "eos_token_id": eos, "pad_token_id": 0, "initializer_range": 0.5}
    vision = {"depth": 2, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2, "patch_size": 4,
              "spatial_merge_size": 2, "temporal_patch_size": 2}
    config = transformers.Qwen2VLConfig(text_config=text, vision_config=vision,
                                        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                                        vision_start_token_id=ids["<|vision_start|>"],
                                        vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.Qwen2VLForConditionalGeneration(config).eval()
    with torch.no_grad():  # a wide spread, so that greedy steps have clear winners
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.5 if "language_model" in name or "lm_head" in name else 0.2)
    model.generation_config = transformers.GenerationConfig(bos_token_id=1, eos_token_id=eos, pad_token_id=0,
                                                            do_sample=False)
    model.save_pretrained(folder)
    images = transformers.Qwen2VLImageProcessor(min_pixels=16 * 16, max_pixels=64 * 64, patch_size=4,
                                                temporal_patch_size=2, merge_size=2)
    processor = transformers.Qwen2VLProcessor(image_processor=images, tokenizer=tokenizer,
                                              video_processor=transformers.Qwen2VLVideoProcessor(),
                                              chat_template=TEMPLATE)
    processor.save_pretrained(folder)
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(folder)


def make_images(out):
    """qwen2-vl-images/tall.png: a 60x150 crop of astronaut.png (portrait, another grid)."""
    from PIL import Image

    folder = os.path.join(out, "qwen2-vl-images")
    os.makedirs(folder, exist_ok=True)
    Image.open(os.path.join(HERE, "images", "astronaut.png")).convert("RGB").crop((200, 40, 260, 190)).save(
        os.path.join(folder, "tall.png"))


def goldens(folder, image_dir):
    import torch
    import transformers
    from PIL import Image

    model = transformers.Qwen2VLForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
    processor = transformers.AutoProcessor.from_pretrained(folder)
    done = []
    for case in CASES:
        paths = [os.path.join(image_dir if n.startswith("qwen2-vl-images/") else os.path.join(HERE, "images"), n)
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
        grids = inputs["image_grid_thw"].tolist() if images else []
        counts = [t * h * w for t, h, w in grids]
        pixels = [inputs["pixel_values"][sum(counts[:i]):sum(counts[:i]) + n] for i, n in enumerate(counts)]
        rope, delta = (model.model.get_rope_index(inputs["input_ids"], inputs["mm_token_type_ids"],
                                                  image_grid_thw=inputs["image_grid_thw"])
                       if images else (None, torch.zeros(1, 1)))
        done.append({**case, "text": text, "input_ids": ids, "output_ids": new, "top2_gaps": gaps,
                     "image_tokens": ids.count(model.config.image_token_id), "grids": grids,
                     "rope": rope[:, 0].tolist() if rope is not None else [], "rope_delta": int(delta.flatten()[0]),
                     "pixel_values": [p.flatten().tolist() for p in pixels],
                     "pixel_shapes": [list(p.shape) for p in pixels],
                     "text_out": processor.tokenizer.decode(new, skip_special_tokens=True)})
    return {"new_tokens": NEW_TOKENS, "image_token_id": model.config.image_token_id, "cases": done}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(HERE, "golden", "vlm"))
    args = p.parse_args()
    if not os.path.isfile(os.path.join(TOKENIZER, "tokenizer.json")):
        sys.exit(f"make_qwen2_vl_models.py: {TOKENIZER} is missing (make_lm_models.py makes it first)")
    digest = source_hash()
    src, out = os.path.join(args.out, f"{NAME}-src"), os.path.join(args.out, NAME)
    stamp = os.path.join(out, ".source-hash")
    if os.path.isfile(stamp) and open(stamp).read() == digest:
        log(f"{NAME}: up to date")
        return
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    make_source(src)
    make_images(args.out)
    import export_vlm

    manifest = export_vlm.export(src, out, max_context=MAX_CONTEXT, max_batch=8, log=lambda m: log(f"{NAME}: {m}"),
                                 compile_options=FIXTURE_COMPILE)
    worst = manifest["check"]["max_logit_difference"]
    if not worst <= 1e-4:  # this fixture's stated tolerance (docs/multimodal.md)
        sys.exit(f"make_qwen2_vl_models.py: {NAME}: model.pt2 differs from transformers by {worst} (> 1e-4)")
    with open(os.path.join(args.out, f"{NAME}.golden.json"), "w") as f:
        json.dump(goldens(src, args.out), f)
    with open(stamp, "w") as f:
        f.write(digest)
    log(f"{NAME}: written")


if __name__ == "__main__":
    main()
