"""Export a Hugging Face causal language model folder into a torch-node model folder.

    python export_causal_lm.py MODEL_DIR OUT_DIR [--dtype float32|bfloat16|float16]
                               [--max-context N] [--max-batch N] [--autotune]

Writes OUT_DIR/model.pt2 (torch.export + AOTInductor, CPU), tokenizer.json,
tokenizer_config.json (with the chat template), generation_config.json and manifest.json
(kind "causal-lm"). Llama-family models (Llama, SmolLM, Mistral, Qwen2, Qwen3) and GPT-2 export
through transformers' own modeling code; any other architecture is refused here, at export.

The program is one step of the decoder:

    logits = model(input_ids [B, T] int64, positions [B, T] int64,
                   past.0.key, past.0.value, ..., past.{L-1}.value)   # each [B, Hkv, C, D]

`positions[b, t]` is the cache slot (= position) of token t of row b: rows may be at different
positions (iteration-level batching). The step writes each token's key and value into the cache
tensors *in place* at its position and attends, for token (b, t), over the slots
`0..=positions[b, t]` of row b (a sliding window where the model has one). The caller owns the
cache (torch-node's Rust side allocates it, per sequence or per batch, with a capacity C it
chooses); the program returns only `logits [B, V]` (float32) of each row's last token.

Why this design (measured 2026-11-25 on the 2-core dev box, a random 4-layer Llama, hidden 256,
4 heads / 2 kv heads, head dim 64, cache capacity 2048, one decode step, min of 400 calls):
- cache as inputs mutated in place (this file): AOTInductor keeps the mutation in place — its
  generated kernel writes through the input's own pointer (same storage, data written, logits
  equal to eager within 7e-7) — 1.87 ms at position 20, 1.76 ms at 1,000;
- the same without `enable_gqa`: transformers' `repeat_kv` copies the whole cache to every
  layer's full head count per step: 12.0 / 11.9 ms. Hence TRANSFORMERS_SDPA_FORCE_GQA=1 below;
- new K/V slices returned and written by the caller (attention over `cat(cache, new)`): 2.2 /
  2.3 ms at best but 10.7 ms at the 25th percentile: the cat allocates and copies the whole
  cache per layer per step;
- transformers' `TorchExportableModuleForDecoderOnlyLM` (static cache as mutated buffers):
  AOTInductor keeps the buffers between calls, correct, but the cache and its position are
  state of the loaded program: one batch size, one position for all rows, no way to free one
  sequence's rows or share a step between sequences at different positions.
"""
import argparse
import json
import os
import sys
import time

# transformers' SDPA path repeats the kv heads of grouped-query attention (a copy of the whole
# cache per layer per step) unless this is set; libtorch's CPU flash attention reads the grouped
# cache in place (`enable_gqa=True`). Read by transformers at each call, so set before tracing.
os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] = "1"

SUPPORTED = {
    "llama": "Llama / SmolLM",
    "mistral": "Mistral",
    "qwen2": "Qwen2",
    "qwen3": "Qwen3",
    "gpt2": "GPT-2",
}
CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")
DTYPES = ("float32", "bfloat16", "float16")


class ExportError(Exception):
    """A model this exporter refuses, with the reason in the user's words."""


def read_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        raise ExportError(f"{model_dir}: no config.json (expected a Hugging Face model folder)")
    with open(path) as f:
        return json.load(f)


def is_causal_lm(model_dir):
    """True when `model_dir` holds a decoder-only language model (what this script exports);
    `npx torch-node export` uses it to choose this script over export_text.py. Decided by
    config.json alone: an `architectures` entry ending in ForCausalLM / LMHeadModel, or
    `is_decoder` without an encoder."""
    try:
        config = read_config(model_dir)
    except ExportError:
        return False
    if any(a.endswith(CAUSAL_SUFFIXES) for a in config.get("architectures") or []):
        return True
    return bool(config.get("is_decoder")) and not config.get("is_encoder_decoder")


def check_supported(config):
    model_type = config.get("model_type")
    if model_type in SUPPORTED:
        return model_type
    arch = ", ".join(config.get("architectures") or []) or "unknown architecture"
    names = ", ".join(SUPPORTED.values())
    raise ExportError(
        f"unsupported causal LM: {arch} (model_type '{model_type}'); torch-node exports "
        f"{names} models"
    )


def shapes(config):
    """(layers, attention heads, kv heads, head dim) from a transformers config object."""
    if config.model_type == "gpt2":
        return config.n_layer, config.n_head, config.n_head, config.n_embd // config.n_head
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return config.num_hidden_layers, heads, kv, head_dim


def max_positions(config):
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def sliding_window(config):
    """The window every sliding layer uses, None when the model has none."""
    window = getattr(config, "sliding_window", None)
    if config.model_type == "qwen2" or config.model_type == "qwen3":
        window = window if getattr(config, "use_sliding_window", False) else None
    return window


class CallerCache:
    """transformers' Cache protocol over cache tensors the caller owns: `update` writes the
    step's keys and values in place at each row's positions and hands back the whole cache."""

    is_compileable = True

    def __init__(self, tensors, positions):
        self.tensors, self.positions = tensors, positions

    def update(self, keys, values, layer_idx, *args, **kwargs):
        import torch

        cache_k, cache_v = self.tensors[2 * layer_idx], self.tensors[2 * layer_idx + 1]
        rows = torch.arange(keys.shape[0], device=keys.device).unsqueeze(1)
        # [B, H, T, D] -> [B, T, H, D]: advanced indices on dims 0 and 2 put (B, T) first.
        cache_k[rows, :, self.positions] = keys.transpose(1, 2).to(cache_k.dtype)
        cache_v[rows, :, self.positions] = values.transpose(1, 2).to(cache_v.dtype)
        return cache_k, cache_v

    def get_seq_length(self, layer_idx=0):
        return 0


def step_module(model):
    import torch

    config = model.config
    window = sliding_window(config)
    layer_types = getattr(config, "layer_types", None)
    base = model.base_model
    head = model.get_output_embeddings()

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.base, self.head = base, head

        def forward(self, input_ids, positions, *cache):
            slots = torch.arange(cache[0].shape[2], device=input_ids.device).view(1, 1, -1)
            query = positions.unsqueeze(-1)
            full = (slots <= query).unsqueeze(1)  # [B, 1, T, C]
            mask = full
            if window is not None:
                sliding = (full & (slots > query - window).unsqueeze(1))
                if layer_types and len(set(layer_types)) > 1:
                    mask = {"full_attention": full, "sliding_attention": sliding}
                else:
                    mask = sliding
            elif layer_types and "sliding_attention" in layer_types:
                mask = {"full_attention": full, "sliding_attention": full}
            out = self.base(
                input_ids=input_ids,
                position_ids=positions,
                attention_mask=mask,
                past_key_values=CallerCache(list(cache), positions),
                use_cache=True,
            )
            return self.head(out.last_hidden_state[:, -1]).float()

    return Step().eval()


def new_cache(model, batch, capacity, dtype):
    import torch

    layers, _, kv, head_dim = shapes(model.config)
    return [torch.zeros(batch, kv, capacity, head_dim, dtype=dtype) for _ in range(2 * layers)]


def self_check(model, step, dtype):
    """The step against transformers' own forward on the same tokens: a prefill of 5, then 3
    decode steps, one row at a time and two rows at different positions."""
    import torch

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (2, 8), generator=g)
    with torch.no_grad():
        ref = model(input_ids=ids).logits.float()
        cache = new_cache(model, 2, 16, dtype)
        # Row 0 prefills 5 tokens, row 1 only 3, then both decode at their own positions.
        step(ids[:1, :5], torch.arange(5).view(1, -1), *[c[:1] for c in cache])
        step(ids[1:, :3], torch.arange(3).view(1, -1), *[c[1:] for c in cache])
        worst = 0.0
        for k in range(3):
            pos = torch.tensor([[5 + k], [3 + k]])
            tok = torch.gather(ids, 1, pos)
            out = step(tok, pos, *cache)
            want = torch.stack([ref[0, 5 + k], ref[1, 3 + k]])
            # A NaN (a poisoned weight the program did read: unused_constants) counts as inf.
            worst = max(worst, (out - want).abs().nan_to_num(nan=float("inf")).max().item())
    tolerance = 1e-3 if dtype == torch.float32 else 0.5
    if not worst <= tolerance:
        raise ExportError(
            f"the exported step does not match transformers' forward (max logit difference "
            f"{worst:.3g}): this model's attention or cache is not one torch-node supports"
        )
    return worst


# --autotune: Inductor's C++ GEMM template, tuned per matmul shape, with the weights frozen into
# its packed layout. Measured 2026-11-26 on the 2-core EPYC (no bf16), SmolLM2-135M fp32, 128
# greedy tokens: one stream 22.6 -> 40.7 tokens/s (node-llama-cpp F32: 29-31); at the export's
# hint (batch 2) the 49152-wide output head takes 4.4 ms against aten's 18.9. The package is
# twice the size (the original weights stay beside the packed ones, unread: unused_constants,
# whose memory the runtime gives back), and a 513-token prompt's first token takes 1.9 s
# instead of 1.0 (the kernels are tuned for decode).
AUTOTUNE_CONFIG = {"freezing": True, "max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN"}


def export_program(model, step, dtype, max_context, max_batch, path, autotune=False):
    import torch
    from torch.export import Dim

    # torch.export specializes sizes 0 and 1: example sizes of 2+, all distinct, so that no two
    # dims are guessed equal.
    batch, seq, capacity = 2, 3, 8
    ids = torch.zeros(batch, seq, dtype=torch.long)
    positions = torch.arange(seq).repeat(batch, 1)
    cache = new_cache(model, batch, capacity, dtype)
    b = Dim("batch", min=1, max=max_batch)
    t = Dim("seq", min=1, max=max_context)
    c = Dim("context", min=2, max=max_context)
    dynamic = ({0: b, 1: t}, {0: b, 1: t}, tuple({0: b, 2: c} for _ in cache))
    with torch.no_grad():
        program = torch.export.export(step, (ids, positions, *cache), dynamic_shapes=dynamic)
    torch._inductor.aoti_compile_and_package(
        program, package_path=path, inductor_configs=AUTOTUNE_CONFIG if autotune else None
    )


def unused_constants(package):
    """The constants the compiled program declares but never reads: {name: (original FQN, dtype,
    shape)}. With --autotune, the C++ GEMM template packs each weight into a new constant and
    torch 2.13 keeps the original beside it (cpp_gemm_template.prune_tensors finds no get_attr
    user in AOT mode), so the loaded weights took twice their size. Read from the package's
    wrapper.cpp: a constant whose name appears only in its constants_info_ entry and in its
    `auto& name = constants_->at(i)` line, and whose index nothing else takes. export() then
    proves it: it fills them with NaN and the compiled check must still match transformers."""
    import re
    import zipfile

    with zipfile.ZipFile(package) as z:
        sources = [z.read(n).decode() for n in z.namelist() if n.endswith(".wrapper.cpp")]
    if len(sources) != 1:
        return {}
    src = sources[0]
    counts = {}
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", src):
        counts[word] = counts.get(word, 0) + 1
    indexed = set(re.findall(r"constants_->at\((\d+)\)", src))
    unused = {}
    for i, name in re.findall(r'constants_info_\[(\d+)\]\.name = "([^"]+)";', src):
        declared = f"auto& {name} = constants_->at({i});" in src
        field = lambda key: re.search(rf"constants_info_\[{i}\]\.{key} = ([^;]*);", src)
        fqn, dtype, shape = field("original_fqn"), field("dtype"), field("shape")
        if counts.get(name) == 2 and declared and i in indexed and fqn and dtype and shape:
            uses = len(re.findall(rf"constants_->at\({i}\)", src))
            if uses == 1:
                sizes = [int(x) for x in shape.group(1).strip("{} ").split(",") if x.strip()]
                unused[name] = (fqn.group(1).strip('"'), dtype.group(1).split("_dtype_")[-1], sizes)
    return unused


def write_tokenizer(model_dir, out_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.save_pretrained(out_dir)
    if not os.path.isfile(os.path.join(out_dir, "tokenizer.json")):
        raise ExportError(f"{model_dir}: the tokenizer has no fast (tokenizer.json) form")
    return tokenizer


def eos_ids(model, tokenizer):
    ids = []
    for source in (model.generation_config.eos_token_id, model.config.eos_token_id, tokenizer.eos_token_id):
        for i in source if isinstance(source, list) else [source]:
            if i is not None and i not in ids:
                ids.append(int(i))
    return ids


def export(model_dir, out_dir, dtype="float32", max_context=None, max_batch=64, log=print, autotune=False):
    import torch
    import transformers

    config = read_config(model_dir)
    if not is_causal_lm(model_dir):
        raise ExportError(f"{model_dir}: not a causal language model (config.json architectures)")
    model_type = check_supported(config)
    if dtype not in DTYPES:
        raise ExportError(f"--dtype: expected one of {', '.join(DTYPES)}, got '{dtype}'")
    torch_dtype = getattr(torch, dtype)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch_dtype, attn_implementation="sdpa"
    ).eval()
    layers, heads, kv_heads, head_dim = shapes(model.config)
    limit = max_positions(model.config)
    max_context = min(max_context or limit or 2048, limit or max_context or 2048)
    os.makedirs(out_dir, exist_ok=True)

    step = step_module(model)
    worst = self_check(model, step, torch_dtype)
    log(f"self-check: step vs transformers, max logit difference {worst:.2g}")
    started = time.time()
    package = os.path.join(out_dir, "model.pt2")
    export_program(model, step, torch_dtype, max_context, max_batch, package, autotune)
    log(f"model.pt2: torch.export + AOTInductor{' (autotuned)' if autotune else ''} in {time.time() - started:.0f} s")
    # The compiled program against transformers, as the step was: the same prefills and decodes.
    runner = torch._inductor.aoti_load_package(package)
    # Weights the program never reads: NaN in them must change nothing, and the runtime gives
    # their memory back at load (manifest "unused_constants").
    unused = unused_constants(package)
    if unused:
        poison = {n: torch.full(s, float("nan"), dtype=getattr(torch, d)) for n, (_, d, s) in unused.items()}
        runner.loader.update_constant_buffer(poison, False, False)
    worst = self_check(model, lambda *args: runner(*args), torch_dtype)
    log(f"compiled check: model.pt2 vs transformers, max logit difference {worst:.2g}")
    if unused:
        size = sum(t.nbytes for t in poison.values())
        log(f"{len(unused)} weights ({size / 2**20:.0f} MiB) stay in the package unread: released at load")

    tokenizer = write_tokenizer(model_dir, out_dir)
    model.generation_config.save_pretrained(out_dir)
    cache = [f"past.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    manifest = {
        "kind": "causal-lm",
        "format": 1,
        "program": "model.pt2",
        "architecture": (config.get("architectures") or [model_type])[0],
        "model_type": model_type,
        "dtype": dtype,
        "vocab_size": model.config.vocab_size,
        "layers": layers,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "max_context": max_context,
        "max_batch": max_batch,
        "autotuned": autotune,
        "unused_constants": sorted(fqn for fqn, _, _ in unused.values()),
        "sliding_window": sliding_window(model.config),
        "eos_token_ids": eos_ids(model, tokenizer),
        "bos_token_id": tokenizer.bos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "chat_template": bool(getattr(tokenizer, "chat_template", None)),
        "inputs": ["input_ids", "positions", *cache],
        "outputs": ["logits"],
        "cache": {
            "layout": ["batch", "kv_heads", "context", "head_dim"],
            "dtype": dtype,
            "update": "in place at positions[b, t]; token (b, t) attends to slots 0..=positions[b, t]",
        },
    }
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir")
    p.add_argument("out_dir")
    p.add_argument("--dtype", default="float32", choices=DTYPES)
    p.add_argument("--max-context", type=int, default=None, help="longest sequence (default: the model's)")
    p.add_argument("--max-batch", type=int, default=64, help="most sequences in one step")
    p.add_argument("--autotune", action="store_true",
                   help="tune each matmul (Inductor's C++ GEMM template, frozen weights): faster decode, "
                        "a package twice the size on disk")
    args = p.parse_args(argv)
    try:
        export(args.model_dir, args.out_dir, args.dtype, args.max_context, args.max_batch, autotune=args.autotune)
    except ExportError as e:
        print(f"export_causal_lm: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
