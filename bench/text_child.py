"""Python contenders for bench/text.js (npm run bench:text).

    python bench/text_child.py export-onnx MODEL_DIR OUT_DIR
        all-MiniLM-L6-v2's transformer (the same weights) exported to ONNX for transformers.js'
        feature-extraction pipeline: OUT_DIR/{config.json, tokenizer*.json, onnx/model.onnx}.
    python bench/text_child.py serve MODEL_DIR THREADS
        a persistent sentence-transformers child; one request per stdin line, one reply line:
            one N SEED     -> ms for N encode() calls of one sentence each
            batch N SEED   -> ms for N encode() calls of 16 sentences each (batch_size=16)
            many N SEED    -> ms for N encode() calls of 64 sentences each (batch_size=64): Python
                              has no concurrent callers; one batch of 64 is its best case
            quit
        The sentences are bench/text-sentences.json's, as on the Node side.
"""
import json
import os
import shutil
import sys
import time


def export_onnx(model_dir, out):
    import torch
    from transformers import AutoModel

    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(model_dir, name)):
            shutil.copy(os.path.join(model_dir, name), out)
    model = AutoModel.from_pretrained(model_dir).eval()
    ids = torch.ones(2, 8, dtype=torch.long)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", max=512)
    dims = {0: batch, 1: seq}
    tmp = os.path.join(out, "onnx", "model.tmp.onnx")
    torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), tmp,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"], dynamic_shapes=(dims, dims, dims),
                      dynamo=True, external_data=False)
    os.replace(tmp, os.path.join(out, "onnx", "model.onnx"))


def serve(model_dir, threads):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "text-sentences.json"), encoding="utf-8") as f:
        sentences = json.load(f)
    model = SentenceTransformer(model_dir, device="cpu")
    model.encode(sentences[:16], batch_size=16)  # warm-up
    print(json.dumps({"ready": True, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        cmd, *rest = line.split()
        if cmd == "quit":
            break
        n, seed = int(rest[0]), int(rest[1])
        t0 = time.perf_counter()
        for i in range(n):
            if cmd == "one":
                model.encode(sentences[(seed + i) % len(sentences)])
            elif cmd == "many":
                start = ((seed + i) * 64) % (len(sentences) - 64)
                model.encode(sentences[start:start + 64], batch_size=64)
            else:
                start = ((seed + i) * 16) % (len(sentences) - 16)
                model.encode(sentences[start:start + 16], batch_size=16)
        print((time.perf_counter() - t0) * 1e3, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "export-onnx":
        export_onnx(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit("usage: text_child.py export-onnx MODEL_DIR OUT_DIR | serve MODEL_DIR THREADS")
