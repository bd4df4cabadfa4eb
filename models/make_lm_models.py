#!/usr/bin/env python3
"""Causal-LM folders and greedy goldens for torch.text.CausalLM's tests.

Usage (from the repository root):

    .libtorch/bin/python models/make_lm_models.py [--out models/golden/lm] [--jobs N] [NAME ... | --group core|families]
    .libtorch/bin/python models/make_lm_models.py --list

Writes (all generated, under models/golden/, which git ignores):

  lm/tokenizer/            a byte-level BPE tokenizer trained here on a fixed text (ChatML
                           specials, a ChatML chat template): emoji and CJK take several tokens
  lm/<name>-src/           a Hugging Face folder: random weights from a transformers config,
                           seeded, a few hundred KB (MODELS below; VARIANTS export one of them
                           another way: int8/int4 weights, bf16, from a GGUF file)
  lm/<name>/               that folder exported by python/export_causal_lm.py (model.pt2,
                           tokenizer files, generation_config.json, manifest.json)
  lm/<name>.golden.json    transformers' generate(do_sample=False) for PROMPTS, 64 new tokens,
                           fp32 (a quantized variant: its own quantized eager model): prompt ids,
                           new ids, and Python's top-2 logit gap at each step (a test excuses a
                           split where that gap is < 1e-4)

NAMEs (default: all; --list prints them) choose models; the stale ones are made by --jobs worker
processes (default: the cores, at most 4), each making one model after another (torch, transformers
and Inductor imported and warmed once), each model's output kept and shown only when it fails: one
line per model. A model is remade only when its config, the tokenizer, this script's
export settings or python/ changed (the hash in <name>/.source-hash), so a second run compiles
nothing. Each is an AOTInductor compile of a 2-layer model, with the C++ wrapper at -O0
(FIXTURE_COMPILE: these tiny programs' speed does not matter, their compile time does).
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXPORT = os.path.join(ROOT, "python", "export_causal_lm.py")
sys.path.insert(0, os.path.dirname(EXPORT))
from cpu_flags import native_bf16  # noqa: E402  (the exporter's own CPU test)
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
    # The families __tests__/lm-families.test.js checks (issue 37), none with code of its own in
    # the exporter; each tiny config sets what sets the family apart.
    # SmolLM2's shape: 3 query heads per kv head (135M: 9 heads, 3 kv heads), tied head.
    "smollm-tiny": (
        "LlamaConfig",
        dict(hidden_size=48, intermediate_size=128, num_hidden_layers=2, num_attention_heads=3,
             num_key_value_heads=1, head_dim=16, max_position_embeddings=MAX_CONTEXT,
             tie_word_embeddings=True, rope_theta=100000.0, **COMMON),
    ),
    # Gemma 2: attention-logit and final-logit soft-capping, query_pre_attn_scalar scaling, a
    # sliding layer then a full one, sqrt(hidden)-scaled embeddings, GeGLU.
    "gemma2-tiny": (
        "Gemma2Config",
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=MAX_CONTEXT, sliding_window=24,
             attn_logit_softcapping=5.0, final_logit_softcapping=8.0, query_pre_attn_scalar=24,
             layer_types=["sliding_attention", "full_attention"], **COMMON),
    ),
    # Gemma 3 (text): q/k norms, a local rope base on the sliding layer, no soft-capping.
    "gemma3-tiny": (
        "Gemma3TextConfig",
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=MAX_CONTEXT, sliding_window=24,
             query_pre_attn_scalar=16, layer_types=["sliding_attention", "full_attention"], **COMMON),
    ),
    # Phi-3 / Phi-4-mini: fused qkv and gate_up projections, partial rotary (Phi-4-mini: 0.75).
    "phi3-tiny": (
        "Phi3Config",
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=MAX_CONTEXT, partial_rotary_factor=0.5,
             tie_word_embeddings=False, **COMMON),
    ),
    # Granite: embedding, residual, attention and logit multipliers.
    "granite-tiny": (
        "GraniteConfig",
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=MAX_CONTEXT, embedding_multiplier=6.0,
             residual_multiplier=0.5, attention_multiplier=0.1, logits_scaling=4.0,
             tie_word_embeddings=True, **COMMON),
    ),
    # OLMo 2: q/k norms over all heads, norms after attention and MLP.
    "olmo2-tiny": (
        "Olmo2Config",
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=MAX_CONTEXT, tie_word_embeddings=False, **COMMON),
    ),
    # GPT-NeoX (Pythia): fused qkv, a quarter of each head rotated, parallel residual.
    "gpt-neox-tiny": (
        "GPTNeoXConfig",
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=MAX_CONTEXT, rotary_pct=0.25, use_parallel_residual=True,
             tie_word_embeddings=False, **COMMON),
    ),
    # StarCoder2: biases, LayerNorm, a sliding window on every layer.
    "starcoder2-tiny": (
        "Starcoder2Config",
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=MAX_CONTEXT, sliding_window=24, use_bias=True,
             **COMMON),
    ),
    # Mixture of experts: 4 experts, 2 per token (transformers' batched_mm experts: a gather of
    # each token's experts' weights, one program for any routing).
    "qwen2-moe-tiny": (
        "Qwen2MoeConfig",
        dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, shared_expert_intermediate_size=64,
             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, num_experts=4,
             num_experts_per_tok=2, max_position_embeddings=MAX_CONTEXT, **COMMON),
    ),
    "mixtral-tiny": (
        "MixtralConfig",
        dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, sliding_window=24,
             max_position_embeddings=MAX_CONTEXT, **COMMON),
    ),
    "olmoe-tiny": (
        "OlmoeConfig",
        dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, max_position_embeddings=MAX_CONTEXT,
             **COMMON),
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
    # Written aside and renamed: workers (--jobs) may make it at the same time.
    tmp = f"{folder}.tmp-{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    fast.save_pretrained(tmp)
    try:
        os.rename(tmp, folder)
    except OSError:  # another worker's is there: the same bytes
        shutil.rmtree(tmp, ignore_errors=True)


def make_source(name, folder, tokenizer_dir):
    import torch
    import transformers

    kind, kwargs = MODELS[VARIANTS.get(name, (name, {}))[0]]
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
# Other exports of a model of MODELS: name -> (model, export_causal_lm.export options). "gguf":
# the model written as an F32 GGUF file (write_gguf), and that file exported.
VARIANTS = {
    "llama-tiny-int8": ("llama-tiny", {"quantize": "int8"}),
    "llama-tiny-int4": ("llama-tiny", {"quantize": "int4"}),
    "smollm-tiny-gguf": ("smollm-tiny", {"gguf": True}),
}


# bf16 variants only where the CPU multiplies bf16 natively: where their numbers mean something.
if native_bf16():
    VARIANTS["smollm-tiny-bf16"] = ("smollm-tiny", {"dtype": "bfloat16"})
# Inductor options for these fixtures: the AOTInductor wrapper (run_impl, one big function) at -O0
# instead of -O1; the kernels stay at -O3. Measured 2026-11-26 on the AMD EPYC, 2 cores (loaded
# by other builds: CPU seconds, not wall), llama-tiny's compile: 13-14 s of g++ at -O1, 7.6-11 s
# at -O0, beside ~6 s of Inductor's Python. (All at -O0, debug_compile, was slower: 14.7 s.)
FIXTURE_COMPILE = {"aot_inductor.compile_wrapper_opt_level": "O0"}
PYTHON_DIR = os.path.join(ROOT, "python")


# The models the install makes (the causal-lm, cli, serve and chat tests read them); the others
# (Qwen2, Qwen3 and Mistral, which only causal-lm.test.js reads; the families, the quantized, bf16
# and GGUF variants, which only lm-families.test.js reads) `npm test` makes the first time it
# runs (tools/models.js's lazy job): they are most of the compiles, and the install's time is
# the addon's cold build beside these compiles (issue 34: under 10 minutes on 2 cores).
CORE = ["llama-tiny", "gpt2-tiny"]
GROUPS = {"core": lambda n: n in CORE, "families": lambda n: n not in CORE}


def names():
    return [*MODELS, *VARIANTS]


def source_hash(name, tokenizer_bytes):
    """What a model's folder is made from: its config, its export options, the tokenizer, the
    exporter (python/), the fixture compile options, and the torch/transformers versions."""
    from importlib.metadata import version

    base, options = VARIANTS.get(name, (name, {}))
    exporter = b"".join(
        open(os.path.join(PYTHON_DIR, f), "rb").read() for f in sorted(os.listdir(PYTHON_DIR)) if f.endswith(".py")
    )
    versions = [version(p) for p in ("torch", "transformers")]
    return file_hash(MODELS[base], options, tokenizer_bytes, exporter, name in AUTOTUNED, FIXTURE_COMPILE, versions)


def goldens(source, model=None, dtype="float32"):
    """transformers' greedy generate on PROMPTS: `model` (a quantized one), else the fp32 source."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    if model is None:
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
    return {"new_tokens": NEW_TOKENS, "dtype": dtype, "cases": cases}


def write_gguf(source, path):
    """`source` (a Llama folder of MODELS) as a GGUF file, F32, as llama.cpp's convert_hf_to_gguf
    writes a Llama: llama.* metadata, the byte-level BPE tokenizer (tokens, merges, types,
    special ids, chat template), tensors under GGUF names with q/k rows permuted to llama.cpp's
    rotary layout (transformers' GGUF loader permutes them back)."""
    import gguf
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    c = model.config
    tok = read_json(os.path.join(source, "tokenizer.json"))
    vocab = tok["model"]["vocab"]
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    tokens = [None] * c.vocab_size
    for piece, i in {**vocab, **added}.items():
        tokens[i] = piece
    # The model's vocabulary is a few rows larger than the tokenizer's (make_source): unused rows.
    types = [gguf.TokenType.CONTROL if t in added else gguf.TokenType.NORMAL if t else gguf.TokenType.UNUSED
             for t in tokens]
    tokens = [t if t is not None else f"[UNUSED{i}]" for i, t in enumerate(tokens)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]

    w = gguf.GGUFWriter(path, "llama")
    w.add_name(os.path.basename(source))
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_dimension_count(c.head_dim)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_vocab_size(c.vocab_size)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(c.bos_token_id)
    w.add_eos_token_id(c.eos_token_id)
    w.add_pad_token_id(c.pad_token_id)
    w.add_chat_template(CHAT_TEMPLATE)

    def permute(weights, heads):
        return weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(
            weights.shape
        )

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, c.num_hidden_layers)
    state = model.state_dict()
    if c.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # llama.cpp writes output.weight only when untied
    for key, tensor in state.items():
        data = tensor.numpy()
        if key.endswith("q_proj.weight"):
            data = permute(data, c.num_attention_heads)
        elif key.endswith("k_proj.weight"):
            data = permute(data, c.num_key_value_heads)
        w.add_tensor(names.get_name(key, try_suffixes=(".weight", ".bias")), data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make(name, out_dir):
    """One model, in this process: its source folder, the export, its goldens. Prints what the
    exporter says; returns a summary for the parent (seconds, CPU seconds, the compile's figures)."""
    sys.path.insert(0, PYTHON_DIR)
    import export_causal_lm

    tokenizer_dir = os.path.join(out_dir, "tokenizer")
    make_tokenizer(tokenizer_dir)
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), "rb") as f:
        want = source_hash(name, f.read())
    source = os.path.join(out_dir, f"{name}-src")
    out = os.path.join(out_dir, name)
    _, options = VARIANTS.get(name, (name, {}))
    started, cpu = time.time(), os.times()
    make_source(name, source, tokenizer_dir)
    options = dict(options)
    model_path = source
    if options.pop("gguf", False):
        model_path = os.path.join(source, "model.gguf")
        write_gguf(source, model_path)
    timings = {}
    manifest = export_causal_lm.export(
        model_path, out, max_context=MAX_CONTEXT, max_batch=16, autotune=name in AUTOTUNED,
        compile_options=FIXTURE_COMPILE, timings=timings, **options,
    )
    with open(os.path.join(out, ".source-hash"), "w") as f:
        f.write(want + "\n")
    # fp32 transformers' tokens; a quantized export's: transformers' with the same quantized layers.
    g = goldens(source, timings.get("eager_model"))
    g["export"] = want
    write_json(os.path.join(out_dir, f"{name}.golden.json"), g)
    summary = {k: v for k, v in timings.items() if isinstance(v, (int, float, str))}
    now = os.times()
    cpu_s = now.user + now.system + now.children_user + now.children_system
    cpu_s -= cpu.user + cpu.system + cpu.children_user + cpu.children_system
    summary.update(seconds=round(time.time() - started, 1), cpu_s=round(cpu_s, 1), prompts=len(g["cases"]))
    return summary


def stale(name, out_dir, tokenizer_bytes):
    out = os.path.join(out_dir, name)
    stamp = os.path.join(out, ".source-hash")
    have = open(stamp).read().strip() if os.path.isfile(stamp) else None
    golden = read_json(os.path.join(out_dir, f"{name}.golden.json")) or {}
    want = source_hash(name, tokenizer_bytes) if tokenizer_bytes else None
    return not (want and have == want and golden.get("export") == want and os.path.isfile(os.path.join(out, "model.pt2")))


def serve(out_dir):
    """The worker: makes the models named on stdin ("NAME LOG" lines), one after another in this
    process, each one's output (Python's and g++'s: file descriptors 1 and 2) into its LOG, and
    answers one line each on its own stdout: "ok NAME SUMMARY" or "failed NAME"."""
    import traceback

    answer = os.fdopen(os.dup(1), "w")
    for line in sys.stdin:
        name, path = line.rstrip("\n").split(" ", 1)
        sys.stdout.flush()
        sys.stderr.flush()
        with open(path, "w") as f:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
        ok, summary = True, None
        try:
            summary = make(name, out_dir)
        except Exception:  # the parent shows the traceback; the next model goes on
            traceback.print_exc()
            ok = False
        sys.stdout.flush()
        sys.stderr.flush()
        answer.write(f"ok {name} {json.dumps(summary)}\n" if ok else f"failed {name}\n")
        answer.flush()


def run_workers(todo, out_dir, jobs):
    """`jobs` worker processes (serve), each making the next waiting model when it is done with the
    last: one warm process makes several models (torch, transformers and Inductor imported and
    warmed once: ~10 s of CPU a model less than a process each). One line a model; a model that
    fails shows its output. True when all succeeded."""
    import selectors

    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
           "TQDM_DISABLE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    waiting, ok = list(todo), True
    logs = tempfile.TemporaryDirectory(prefix="make-lm-")
    sel = selectors.DefaultSelector()

    def start():
        cmd = [sys.executable, os.path.abspath(__file__), "--out", out_dir, "--worker"]
        # Its own output before the first model (import warnings) into a file: a pipe could stall it.
        early = tempfile.TemporaryFile()
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=early, env=env,
                                cwd=ROOT, text=True)
        worker = {"proc": proc, "early": early, "name": None}
        sel.register(proc.stdout, selectors.EVENT_READ, worker)
        return worker

    def give(worker):
        if not waiting:
            worker["proc"].stdin.close()
            return
        name = waiting.pop(0)
        worker.update(name=name, log=os.path.join(logs.name, f"{name}.log"), t0=time.time())
        worker["proc"].stdin.write(f"{name} {worker['log']}\n")
        worker["proc"].stdin.flush()

    def output(worker):
        with open(worker["log"], errors="replace") as f:
            return f.read()

    for worker in [start() for _ in range(min(jobs, len(waiting)))]:
        give(worker)
    while sel.get_map():
        for key, _ in sel.select():
            worker, line = key.data, key.fileobj.readline()
            if line:
                status, name, *rest = line.rstrip("\n").split(" ", 2)
                if status == "ok":
                    summary = json.loads(rest[0])
                    detail = ", ".join(
                        f"{k} {summary[k]}" for k in ("compile_s", "cpu_s", "check", "agreement") if k in summary
                    )
                    log(f"{name}: made in {time.time() - worker['t0']:.0f} s ({detail})")
                else:
                    ok = False
                    log(f"{name}: FAILED; its output:\n{output(worker)}")
                worker["name"] = None
                give(worker)
                continue
            # The worker ended: after its last model, or in the middle of one (a crash).
            sel.unregister(key.fileobj)
            code = worker["proc"].wait()
            if worker["name"]:
                ok = False
                worker["early"].seek(0)
                early = worker["early"].read().decode(errors="replace")
                log(f"{worker['name']}: FAILED (the worker's exit {code}); its output:\n{early}{output(worker)}")
                if waiting:
                    give(start())
            worker["early"].close()
    logs.cleanup()
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="models to make (default: all; --list)")
    p.add_argument("--out", default=os.path.join(HERE, "golden", "lm"))
    p.add_argument("--jobs", type=int, default=min(4, len(os.sched_getaffinity(0))))
    p.add_argument("--list", action="store_true", help="print the model names, one a line")
    p.add_argument("--group", choices=sorted(GROUPS), help="only the models of a group (default: all)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    chosen = [n for n in names() if not args.group or GROUPS[args.group](n)]
    if args.list:
        print("\n".join(chosen))
        return 0
    if args.group and args.names:
        p.error("give model names or --group, not both")
    unknown = [n for n in args.names if n not in names()]
    if unknown:
        p.error(f"unknown model {', '.join(unknown)} (--list)")
    import importlib.util

    missing = [m for m in ("tokenizers", "torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        log(f"skipped: {', '.join(missing)} not installed (pip install torch transformers tokenizers)")
        return 0
    if args.worker:
        serve(args.out)
        return 0
    tokenizer_dir = os.path.join(args.out, "tokenizer")
    make_tokenizer(tokenizer_dir)
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), "rb") as f:
        tokenizer_bytes = f.read()
    todo = []
    # The quantized exports first: the longest compiles (the others fill in beside them).
    for name in sorted(args.names or chosen, key=lambda n: "quantize" not in VARIANTS.get(n, (n, {}))[1]):
        if stale(name, args.out, tokenizer_bytes):
            todo.append(name)
        else:
            log(f"{name}: up to date")
    return 0 if run_workers(todo, args.out, max(1, args.jobs)) else 1


if __name__ == "__main__":
    sys.exit(main())
