#!/usr/bin/env python3
"""Causal-LM folders and greedy goldens for torch.text.CausalLM's tests.

Usage (from the repository root):

    .libtorch/bin/python models/make_lm_models.py [--out models/golden/lm]

Writes (all generated, under models/golden/, which git ignores):

  lm/tokenizer/            a byte-level BPE tokenizer trained here on a fixed text (ChatML
                           specials, a ChatML chat template): emoji and CJK take several tokens
  lm/<name>-src/           a Hugging Face folder: random weights from a transformers config,
                           seeded, a few hundred KB (MODELS below)
  lm/<name>/               that folder exported by python/export_causal_lm.py (model.pt2,
                           tokenizer files, generation_config.json, manifest.json)
  lm/<name>.golden.json    transformers' generate(do_sample=False) for PROMPTS, 64 new tokens,
                           fp32: prompt ids, new ids, and Python's top-2 logit gap at each step
                           (a test excuses a split where that gap is < 1e-4)

Idempotent: a folder is rebuilt only when its config, the tokenizer or export_causal_lm.py
changed (the hash in <name>/.source-hash), goldens only when the export changed. An AOTInductor
compile of one of these costs about a minute on 2 cores.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXPORT = os.path.join(ROOT, "python", "export_causal_lm.py")
PROG = "make_lm_models.py"
NEW_TOKENS = 64
MAX_CONTEXT = 256

# Random weights at a wide init spread, so that greedy steps have clear winners (logit gaps of
# whole units, not 1e-5 ties) and the goldens test the program, not the noise.
COMMON = {"initializer_range": 0.5, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
MODELS = {
    "llama-tiny": (
        "LlamaConfig",
        dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=MAX_CONTEXT,
             tie_word_embeddings=True, rope_theta=10000.0, **COMMON),
    ),
    "gpt2-tiny": (
        "GPT2Config",
        dict(n_embd=64, n_layer=2, n_head=4, n_positions=MAX_CONTEXT, **COMMON),
    ),
    # The other families the exporter claims, each with what sets it apart: Qwen2's q/k/v biases
    # and a sliding window on its upper layers (24 slots: the goldens' 64 new tokens cross it),
    # Qwen3's q/k norms, Mistral's sliding window on every layer and an untied head.
    "qwen2-tiny": (
        "Qwen2Config",
        dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=MAX_CONTEXT, use_sliding_window=True,
             sliding_window=24, max_window_layers=1, tie_word_embeddings=True, **COMMON),
    ),
    "qwen3-tiny": (
        "Qwen3Config",
        dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=MAX_CONTEXT,
             tie_word_embeddings=True, **COMMON),
    ),
    "mistral-tiny": (
        "MistralConfig",
        dict(hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=MAX_CONTEXT, sliding_window=24,
             tie_word_embeddings=False, **COMMON),
    ),
}
SPECIALS = ["<|pad|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2: pad, bos, eos
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time there was a small model that wrote stories about the sea.",
    "Hello, world! How are you today? I am fine, thank you.",
    "PyTorch runs in Node: tensors, modules, and now text generation.",
    "東京は日本の首都です。北京是中国的首都。",
    "I ❤️ NY 👩‍👩‍👧‍👦 🇯🇵 emoji, café, naïve, Ångström.",
    "def add(a, b):\n    return a + b\n",
]
PROMPTS = [
    {"name": "story", "prompt": "Once upon a time"},
    {"name": "unicode", "prompt": "東京 ❤️ café"},
    {"name": "single", "prompt": "a"},
    {
        "name": "chat",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
    },
]


def log(message):
    print(f"{PROG}: {message}", flush=True)


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=1, ensure_ascii=False)
        f.write("\n")


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def file_hash(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else json.dumps(p, sort_keys=True).encode())
    return h.hexdigest()[:16]


def make_tokenizer(folder):
    """A byte-level BPE (GPT-2's pre-tokenizer and decoder), deterministic for a fixed corpus."""
    if os.path.isfile(os.path.join(folder, "tokenizer.json")):
        return
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|pad|>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        model_max_length=MAX_CONTEXT,
    )
    fast.chat_template = CHAT_TEMPLATE
    os.makedirs(folder, exist_ok=True)
    fast.save_pretrained(folder)
    log(f"{folder}: tokenizer, {tok.get_vocab_size()} tokens")


def make_source(name, folder, tokenizer_dir):
    import shutil

    import torch
    import transformers

    kind, kwargs = MODELS[name]
    vocab = read_json(os.path.join(tokenizer_dir, "tokenizer.json"))["model"]["vocab"]
    config = getattr(transformers, kind)(vocab_size=len(vocab) + len(SPECIALS), **kwargs)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=1, eos_token_id=2, pad_token_id=0, do_sample=False
    )
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder)
    for f in os.listdir(tokenizer_dir):
        shutil.copyfile(os.path.join(tokenizer_dir, f), os.path.join(folder, f))


# Exported with --autotune (Inductor's tuned C++ GEMMs over frozen weights), so that the goldens
# test that path too; the others compile the default way (tuning costs ~30 s a model).
AUTOTUNED = {"llama-tiny"}


def export(source, out, autotune=False):
    cmd = [sys.executable, EXPORT, source, out, "--max-context", str(MAX_CONTEXT), "--max-batch", "16"]
    cmd += ["--autotune"] if autotune else []
    log(" ".join(os.path.relpath(c, ROOT) if os.path.isabs(c) else c for c in cmd))
    subprocess.run(cmd, check=True)


def goldens(source):
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    model = transformers.AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
    cases = []
    for p in PROMPTS:
        case = dict(p)
        if "messages" in p:
            text = tokenizer.apply_chat_template(p["messages"], tokenize=False, add_generation_prompt=True)
            case["text"] = text
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            ids = tokenizer(p["prompt"])["input_ids"]
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                do_sample=False,
                max_new_tokens=NEW_TOKENS,
                output_scores=True,
                return_dict_in_generate=True,
            )
        new = out.sequences[0, len(ids):].tolist()
        gaps = []
        for s in out.scores:
            top = torch.topk(s[0].float(), 2).values
            gaps.append(float(top[0] - top[1]))
        case.update(
            input_ids=ids,
            output_ids=new,
            text_out=tokenizer.decode(new, skip_special_tokens=True),
            top2_gaps=gaps,
        )
        cases.append(case)
    return {"new_tokens": NEW_TOKENS, "dtype": "float32", "cases": cases}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(HERE, "golden", "lm"))
    args = p.parse_args()
    try:
        import tokenizers  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        log(f"skipped: {e.name} is not installed (pip install torch transformers tokenizers)")
        return 0
    tokenizer_dir = os.path.join(args.out, "tokenizer")
    make_tokenizer(tokenizer_dir)
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), "rb") as f:
        tokenizer_bytes = f.read()
    with open(EXPORT, "rb") as f:
        exporter = f.read()
    for name in MODELS:
        source = os.path.join(args.out, f"{name}-src")
        out = os.path.join(args.out, name)
        want = file_hash(MODELS[name], tokenizer_bytes, exporter, name in AUTOTUNED)
        stamp = os.path.join(out, ".source-hash")
        have = open(stamp).read().strip() if os.path.isfile(stamp) else None
        if have == want and os.path.isfile(os.path.join(out, "model.pt2")):
            log(f"{name}: up to date")
        else:
            make_source(name, source, tokenizer_dir)
            export(source, out, autotune=name in AUTOTUNED)
            with open(stamp, "w") as f:
                f.write(want + "\n")
        golden = os.path.join(args.out, f"{name}.golden.json")
        old = read_json(golden)
        if old is None or old.get("export") != want:
            g = goldens(source)
            g["export"] = want
            write_json(golden, g)
            log(f"{golden}: {len(g['cases'])} prompts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
