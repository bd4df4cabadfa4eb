#!/usr/bin/env python3
"""A tiny random-weight LLaVA folder and its goldens for torch.text.CausalLM's image tests.

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


def _saved(tokenizer, folder):
    os.makedirs(folder, exist_ok=True)
    tokenizer.save_pretrained(folder)
    return folder


def goldens(folder):
    import torch
    import transformers
    from PIL import Image

    model = transformers.AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    processor = transformers.AutoProcessor.from_pretrained(folder)
    cases = []
    for case in CASES:
        images = [Image.open(os.path.join(HERE, "images", n)).convert("RGB") for n in case["images"]]
        text = processor.apply_chat_template(case["messages"], tokenize=False, add_generation_prompt=True)
        inputs = processor(text=text, images=images or None, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, output_scores=True,
                                 return_dict_in_generate=True)
        ids = inputs["input_ids"][0].tolist()
        new = out.sequences[0, len(ids):].tolist()
        gaps = [float(torch.topk(s[0].float(), 2).values.diff().abs()) for s in out.scores]
        pixels = inputs.get("pixel_values")
        cases.append({**case, "text": text, "input_ids": ids, "output_ids": new, "top2_gaps": gaps,
                      "image_tokens": ids.count(model.config.image_token_id),
                      "pixel_values": [p.flatten().tolist() for p in pixels] if pixels is not None else [],
                      "text_out": processor.tokenizer.decode(new, skip_special_tokens=True)})
    return {"new_tokens": NEW_TOKENS, "image_token_id": model.config.image_token_id, "cases": cases}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(HERE, "golden", "vlm"))
    args = p.parse_args()
    if not os.path.isfile(os.path.join(TOKENIZER, "tokenizer.json")):
        sys.exit(f"make_vlm_models.py: {TOKENIZER} is missing (make_lm_models.py makes it first)")
    digest = source_hash()
    for name, make in ((NAME, make_source), (GEMMA3, make_gemma3_source)):
        src, out = os.path.join(args.out, f"{name}-src"), os.path.join(args.out, name)
        stamp = os.path.join(out, ".source-hash")
        if os.path.isfile(stamp) and open(stamp).read() == digest:
            log(f"{name}: up to date")
            continue
        shutil.rmtree(src, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        make(src)
        import export_vlm

        export_vlm.export(src, out, max_context=MAX_CONTEXT, max_batch=8,
                          log=lambda m, name=name: log(f"{name}: {m}"), compile_options=FIXTURE_COMPILE)
        with open(os.path.join(args.out, f"{name}.golden.json"), "w") as f:
            json.dump(goldens(src), f)
        with open(stamp, "w") as f:
            f.write(digest)
        log(f"{name}: written")


if __name__ == "__main__":
    main()
