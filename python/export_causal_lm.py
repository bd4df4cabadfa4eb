"""Export a Hugging Face causal language model folder into a torch-node model folder.

    python export_causal_lm.py MODEL_DIR OUT_DIR [--dtype float32|bfloat16|float16]
                               [--max-context N] [--max-batch N] [--autotune]

Writes OUT_DIR/model.pt2 (torch.export + AOTInductor, CPU), tokenizer.json,
tokenizer_config.json (with the chat template), generation_config.json and manifest.json
(kind "causal-lm"). Any decoder whose transformers modeling code runs its attention through
transformers' AttentionInterface and its cache through the Cache protocol exports, through that
code: the layer's attention is the function registered here (ATTENTION: per-layer sliding
windows, soft-capping, the layer's scaling, grouped KV heads read in place), the cache is the
caller's (CallerCache), and everything else (embedding scaling, partial rotary, fused QKV,
q/k norms, final-logit soft-capping, tied heads) is the class's own. Made and checked with
Llama, SmolLM, Mistral, Qwen2, Qwen3, GPT-2, Gemma 2, Gemma 3, Phi-3, Granite, OLMo 2,
GPT-NeoX, StarCoder2 and the mixture-of-experts Qwen2-MoE, Mixtral and OLMoE
(models/make_lm_models.py). Any other architecture is refused at export, in one line naming it.

The program is one step of the decoder:

    logits = model(input_ids [B, T] int64, positions [B, T] int64, keep [K] int64,
                   past.0.key, past.0.value, ..., past.{L-1}.value)   # each [B, Hkv, C, D]

`positions[b, t]` is the cache slot (= position) of token t of row b: rows may be at different
positions (iteration-level batching). The step writes each token's key and value into the cache
tensors *in place* at its position and attends, for token (b, t), over the slots
`0..=positions[b, t]` of row b (a sliding window where the model has one). The caller owns the
cache (torch-node's Rust side allocates it, per sequence or per batch, with a capacity C it
chooses); the program returns `logits [B, K, V]` (float32) of each row's last K tokens, K the
LENGTH of `keep` (its values are not read: a shape, so one compiled program serves every K from 1
to KEEP_LOGITS). A prefill keeps 1 (a 3,000-token prompt's [T, V] over a 49k vocabulary would be
600 MB); speculative decoding keeps the k + 1 positions it verifies. Manifest format 2 says the
program takes `keep` ("keep_logits": its most); format 1 programs (before it) take no `keep` and
return [B, V].

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
import importlib.util
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # quantize_lm, decode_gemv, cpu_flags

ATTENTION = "torch_node_caller_cache"
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


def source(model_path):
    """(folder, from_pretrained's extra arguments) of a model folder, or of a GGUF file, which
    transformers reads (the architectures its GGUF loader knows: Llama, Mistral, Qwen2/3,
    Gemma 2/3, Phi-3, GPT-2, StarCoder2, ...) and dequantizes to float weights."""
    if os.path.isfile(model_path) and model_path.endswith(".gguf"):
        return os.path.dirname(os.path.abspath(model_path)), {"gguf_file": os.path.basename(model_path)}
    return model_path, {}


def is_causal_lm(model_dir):
    """True when `model_dir` holds a decoder-only language model (what this script exports);
    `npx torch-node export` uses it to choose this script over export_text.py. Decided by
    config.json alone: an `architectures` entry ending in ForCausalLM / LMHeadModel, or
    `is_decoder` without an encoder."""
    if source(model_dir)[1]:
        return True  # a GGUF file holds a language model
    try:
        config = read_config(model_dir)
    except ExportError:
        return False
    if any(a.endswith(CAUSAL_SUFFIXES) for a in config.get("architectures") or []):
        return True
    return bool(config.get("is_decoder")) and not config.get("is_encoder_decoder")


def causal_lm_class(config):
    """The transformers class that runs `config` (a transformers config object), refused in one
    line naming the architecture when transformers has none, or when its modeling code does not
    go through transformers' attention interface (`_supports_attention_backend`): the export runs
    each attention through the function registered below, so a model that computes attention its
    own way (Falcon, Bloom, MPT, GPT-J, CodeGen, Mamba's recurrences, ...) cannot use the caller's
    cache."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    arch = ", ".join(getattr(config, "architectures", None) or []) or "unknown architecture"
    what = f"unsupported causal LM: {arch} (model_type '{config.model_type}')"
    try:
        cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:
        raise ExportError(f"{what}; this transformers has no causal-LM class for it") from None
    if not getattr(cls, "_supports_attention_backend", False):
        raise ExportError(
            f"{what}; its transformers modeling code ({cls.__name__}) computes attention itself instead of "
            "through transformers' AttentionInterface, which torch-node's export runs each layer's attention through"
        )
    return cls


def max_positions(config):
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def sliding_window(config):
    """The window of the model's sliding layers (the manifest's, informative), None when none."""
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None and "sliding_attention" not in layer_types:
        return None
    if getattr(config, "use_sliding_window", True) is False:
        return None
    return window


class StepState:
    """What the attention function needs of the step being traced or run: each token's cache
    slot (= position), `positions [B, T]`. Set by Step.forward around the model's forward."""

    positions = None
    # True: a bfloat16/float16 program attends in float32 (attention_dtype below).
    attention_in_float32 = False


def attention_dtype(dtype):
    """The dtype a `dtype` program attends in. ATen's CPU flash attention in bfloat16 multiplies
    through MKL's bf16 GEMM, which without AMX takes its generic path: measured 2026-11-26 on the
    2-core AMD EPYC (Zen 4, avx512_bf16, no AMX), one layer of SmolLM2-135M's decode (9 heads,
    3 kv heads, head dim 64, 1,024 cache slots): bf16 0.612 ms, the same upcast to float32 (casts
    included) 0.259 ms, float32 0.100 ms; in SmolLM2 int8 (bf16 activations) the bf16 attention
    was 40% of a step. So without amx_bf16 in /proc/cpuinfo a reduced-precision program attends
    in float32 (more exact, too); with AMX (oneDNN's kernels) it stays in its dtype."""
    from cpu_flags import cpu_flags

    if dtype == "float32":
        return dtype
    return dtype if "amx_bf16" in cpu_flags() else "float32"


def prefill_dtype(dtype):
    """The dtype a quantized program's layers multiply in past quantize_lm.PREFILL_ROWS rows:
    bf16 activations in bf16 where the CPU has native bf16 (its GEMM at hundreds of rows is the
    fastest there: SmolLM2's 513-token prefill 538 ms in bf16 against 891 in fp32, AMD EPYC),
    else float32."""
    from cpu_flags import native_bf16

    return dtype if dtype == "bfloat16" and native_bf16() else "float32"


def default_dtype(quantize):
    """The activations' dtype when --dtype is not given: bfloat16 for a quantized program where
    this CPU multiplies bf16 natively (cpu_flags.native_bf16: ATen's int4 kernel and the int8
    reductions are vectorized for it; SmolLM2 --quantize int4 ran 112-117 tokens/s with bf16
    against 7.7-7.9 with float32 activations through ATen's kernel on an AMD EPYC Zen 4,
    2026-11-29), float32 otherwise. Returns (dtype, why)."""
    from cpu_flags import native_bf16

    how = native_bf16()
    if quantize and how:
        return "bfloat16", f"the default for --quantize on a CPU with {how}; --dtype float32 keeps float32"
    if quantize:
        return "float32", "the default: this CPU has no native bf16 (no avx512_bf16 or amx_bf16 in /proc/cpuinfo)"
    return "float32", "the default"


# /proc/cpuinfo's names for the gcc -m flags Inductor compiles a program with where they differ
# from the flag less its "-m" with "-" as "_".
CPUINFO_NAMES = {"avx512bf16": "avx512_bf16", "avx512vnni": "avx512_vnni", "avx512fp16": "avx512_fp16"}


def compiled_for():
    """What the program's compiled code needs of the CPU (the manifest's `compiled_for`):
    Inductor compiles its kernels for the vector ISA it picks on this machine
    (torch._inductor.cpu_vec_isa.pick_vec_isa: its -m flags), so a package made on an AVX-512
    CPU stops with SIGILL on one without. torch-node checks these flags at load
    (crates/core/src/generate/lm.rs) and refuses the folder in one line instead."""
    import platform

    from torch._inductor import cpu_vec_isa

    isa = cpu_vec_isa.pick_vec_isa()
    flags = set()
    for flag in isa.build_arch_flags().split() if isa else []:
        if flag.startswith("-m") and not flag.startswith(("-march", "-mtune", "-msve")):
            name = flag[2:].replace("-", "_")
            flags.add(CPUINFO_NAMES.get(name, name))
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"isa": str(isa) if isa else "none", "cpu_flags": sorted(flags), "exported_on": cpu}


def kernels(quantization, one_row_kernel, dtype):
    """The manifest's `kernels`: what the program's linear layers multiply through at one row
    (`one_row`) and at 2 to quantize_lm.PREFILL_ROWS rows (`rows`), by kind of layer, as this
    export compiled them; torch-node's own ops (torch_node::*) pick their kernel by the CPU they
    run on (AVX2 + FMA, else ATen's linear), and torch.cpu.kernelCalls() counts which ran."""
    import torch

    float_rows = {"reduction": "inductor reduction", "rows_linear": "torch_node::rows_linear"}
    out = {"float": {"one_row": float_rows.get(one_row_kernel), "rows": "torch_node::rows_linear"}}
    if one_row_kernel is None:
        out["float"] = {"one_row": "aten::linear", "rows": "aten::linear"}
    if quantization and quantization["group_size"] is None:
        out["int8"] = {"one_row": float_rows[one_row_kernel or "rows_linear"], "rows": "torch_node::rows_linear"}
    elif quantization:
        import quantize_lm

        op = ("torch_node::rows_linear_int4_runs" if quantize_lm.int4_kernel(getattr(torch, dtype)) ==
              "rows_linear_int4_runs" else "aten::_weight_int4pack_mm_for_cpu")
        out["int4"] = {"one_row": op, "rows": op}
    return out


def compile_estimate(model, quantization, autotune):
    """The compile's expected time on this machine, for the line before it: it prints nothing
    for minutes. Measured on 2 cores (AMD EPYC, 2026-11): SmolLM2-135M's 211 linear layers
    3.5 min in float32, 9 min with --quantize int8 (552 s); a tiny test model 20-60 s. Scaled by
    the linear layers and the cores (Inductor compiles its kernels in parallel)."""
    import torch

    layers = sum(1 for m in model.modules() if isinstance(m, torch.nn.Linear) or hasattr(m, "qweight"))
    per_layer = 2.6 if quantization else 1.0
    if autotune:
        per_layer *= 3
    seconds = (30 + per_layer * layers) * 2 / max(1, min(os.cpu_count() or 2, 8))
    return f"expected ~{seconds / 60:.0f} min" if seconds >= 90 else f"expected ~{seconds:.0f} s"


def caller_cache_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                           sliding_window=None, softcap=None, **kwargs):
    """transformers' attention-function protocol (registered with AttentionInterface as
    ATTENTION), over the whole caller-owned cache: query [B, H, T, D], key/value [B, Hkv, C, D]
    (what CallerCache.update returned). Token (b, t) attends to the slots 0..=positions[b, t],
    and, on a sliding layer, only to the last `sliding_window` of them (transformers'
    sliding_window_overlay: kv > q - window). The mask transformers built is not used: it knows
    one position per batch, the step has one per row. The layer's window comes from the model:
    the `sliding_window` argument its attention passes (Mistral, Qwen2/3, Gemma 2/3, Phi-3,
    StarCoder2, ...), else the module's own `sliding_window` (Qwen2-MoE). Attention-logit
    soft-capping (Gemma 2: `softcap`) is applied as transformers' eager attention does; grouped
    KV heads are read in place (SDPA's enable_gqa, or a grouped view of the query)."""
    import torch

    positions = StepState.positions
    window = sliding_window if sliding_window is not None else getattr(module, "sliding_window", None)
    slots = torch.arange(key.shape[2], device=query.device).view(1, 1, -1)
    at = positions.unsqueeze(-1)  # [B, T, 1]
    allowed = slots <= at
    if window is not None:
        allowed = allowed & (slots > at - window)
    mask = allowed.unsqueeze(1)  # [B, 1, T, C]
    batch, heads, seq, dim = query.shape
    kv_heads = key.shape[1]
    if softcap is None:
        upcast = StepState.attention_in_float32 and query.dtype != torch.float32
        q, k, v = (t.float() for t in (query, key, value)) if upcast else (query, key, value)
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=scaling, enable_gqa=heads != kv_heads
        ).to(query.dtype)
    else:
        group = heads // kv_heads
        # Heads h = k * group + g share kv head k (transformers' repeat_kv): [B, Hkv, G*T, D],
        # the query (T tokens) made contiguous, so that the cache is read in place, not repeated.
        q = query.contiguous().view(batch, kv_heads, group * seq, dim)
        scores = torch.matmul(q, key.transpose(-1, -2)) * (dim**-0.5 if scaling is None else scaling)
        scores = torch.tanh(scores / softcap) * softcap
        m = mask.unsqueeze(2).expand(batch, 1, group, seq, mask.shape[-1]).reshape(batch, 1, group * seq, -1)
        scores = scores.masked_fill(~m, float("-inf"))
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        out = torch.matmul(weights, value).unflatten(2, (group, seq)).flatten(1, 2)
    return out.transpose(1, 2).contiguous(), None


def register_attention():
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, caller_cache_attention)


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


class ProbeCache:
    """The Cache protocol recording what each layer stores: (layer index, kv heads, head dim)."""

    is_compileable = True

    def __init__(self):
        self.layers = {}

    def update(self, keys, values, layer_idx, *args, **kwargs):
        self.layers[layer_idx] = (keys.shape[1], keys.shape[3], values.shape[1], values.shape[3])
        return keys, values

    def get_seq_length(self, layer_idx=0):
        return 0


def run_model(model, input_ids, positions, cache, keep=None):
    """One forward of transformers' own causal-LM class through ATTENTION and `cache`: the
    logits [B, V] of each row's last token, float32 (final-logit soft-capping, logit scaling and
    tied heads are the class's own); with `keep` (a tensor [K]), [B, K, V] of the last K tokens
    (transformers' logits_to_keep as a tensor of positions: the head runs on those K alone)."""
    import torch

    StepState.positions = positions
    try:
        last = 1
        if keep is not None:
            t = input_ids.shape[1]
            last = torch.arange(t - keep.shape[0], t, device=input_ids.device)
        out = model(input_ids=input_ids, position_ids=positions, past_key_values=cache,
                    use_cache=True, logits_to_keep=last)
    finally:
        StepState.positions = None
    return out.logits[:, -1].float() if keep is None else out.logits.float()


def shapes(model):
    """(layers, attention heads, kv heads, head dim): what one forward stores in the cache, every
    layer alike (a model whose layers store different shapes, or share them, is refused)."""
    import torch

    probe = ProbeCache()
    with torch.no_grad():
        run_model(model, torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, 1, dtype=torch.long), probe)
    config = model.config
    layers = getattr(config, "num_hidden_layers", None)
    kinds = set(probe.layers.values())
    if not probe.layers or sorted(probe.layers) != list(range(layers or len(probe.layers))) or len(kinds) != 1:
        raise ExportError(
            f"unsupported causal LM: {type(model).__name__} (model_type '{config.model_type}'); its layers' "
            f"caches are not one shape per layer ({len(probe.layers)} of {layers} layers store keys/values: "
            f"{sorted(kinds)})"
        )
    kv, head_dim, kv_v, head_dim_v = kinds.pop()
    if (kv, head_dim) != (kv_v, head_dim_v):
        raise ExportError(f"unsupported causal LM: {type(model).__name__}; keys and values differ in shape")
    heads = getattr(config, "num_attention_heads", None) or kv
    return len(probe.layers), heads, kv, head_dim


def step_module(model):
    import torch

    class Step(torch.nn.Module):
        """The program: the model's parameters registered as `base` (its decoder) and `head`
        (output embeddings), the names the manifest's unused_constants use; the forward is the
        causal-LM class's own, which holds the same modules."""

        def __init__(self):
            super().__init__()
            self.base, self.head = model.base_model, model.get_output_embeddings()
            object.__setattr__(self, "lm", model)  # not a submodule: its parameters are base's and head's

        def forward(self, input_ids, positions, keep, *cache):
            return run_model(self.lm, input_ids, positions, CallerCache(list(cache), positions), keep)

    step = Step().eval()
    own = {id(p) for p in step.parameters()} | {id(b) for b in step.buffers()}
    stray = [n for n, p in [*model.named_parameters(), *model.named_buffers()] if id(p) not in own]
    if stray:
        raise ExportError(
            f"unsupported causal LM: {type(model).__name__}; weights outside its decoder and output head: "
            f"{', '.join(stray[:3])}"
        )
    return step


def new_cache(layout, batch, capacity, dtype):
    import torch

    layers, _, kv, head_dim = layout
    return [torch.zeros(batch, kv, capacity, head_dim, dtype=dtype) for _ in range(2 * layers)]


CHECK_TOKENS = (2, 8)  # rows, tokens of the fixed random text the checks run on

# The most trailing positions one call returns logits for (the manifest's "keep_logits"): a
# speculative step verifies at most this many (its draft and one more).
KEEP_LOGITS = 16


def last_only(step):
    """`step` as a format 1 program is called: (ids, positions, *cache) -> logits [B, V] of each
    row's last token (keep = 1), for the checks written for it."""
    import torch

    one = torch.zeros(1, dtype=torch.long)
    return lambda ids, positions, *cache: step(ids, positions, one, *cache)[:, -1]


def check_keep(what, step, layout, dtype, ids, reference, log):
    """check() of one call that keeps the logits of every position: row 0's first 6 tokens
    prefilled with keep = 6, against transformers' logits at those positions."""
    import torch

    cache = new_cache(layout, 1, 8, dtype)
    with torch.no_grad():
        logits = step(ids[:1, :6], torch.arange(6).view(1, -1), torch.zeros(6, dtype=torch.long), *cache)
    return check(f"{what}, logits of 6 positions in one call", logits, reference.target[:1, :6], reference,
                 dtype, log)


def check_ids(config):
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randint(0, config.vocab_size, CHECK_TOKENS, generator=g)


def step_logits(step, layout, dtype, ids):
    """The step's logits on `ids` as torch-node runs it: row 0 prefills 5 tokens, row 1 only 3
    (one row per call), then both decode 2 tokens together, each at its own position, then each
    decodes one more alone (one-row calls: python/decode_gemv.py's path). Returns (logits
    [2, 3, V] of the decodes, the positions they are at: [[5, 6, 7], [3, 4, 5]])."""
    import torch

    cache = new_cache(layout, 2, 16, dtype)
    rows = [[c[r : r + 1] for c in cache] for r in range(2)]
    with torch.no_grad():
        step(ids[:1, :5], torch.arange(5).view(1, -1), *rows[0])
        step(ids[1:, :3], torch.arange(3).view(1, -1), *rows[1])
        outs = []
        for k in range(2):
            pos = torch.tensor([[5 + k], [3 + k]])
            outs.append(step(torch.gather(ids, 1, pos), pos, *cache))
        pos = torch.tensor([[7], [5]])
        alone = [step(ids[r : r + 1, pos[r]], pos[r : r + 1], *rows[r]) for r in range(2)]
        outs.append(torch.cat(alone))
    return torch.stack(outs, 1), torch.tensor([[5, 6, 7], [3, 4, 5]])


def compare(got, want):
    """(max |logit difference| (NaN counts as inf: a poisoned weight the program did read, see
    unused_constants), top-1 agreement in [0, 1]) of logits [..., V] against the reference's."""
    worst = (got - want).abs().nan_to_num(nan=float("inf")).max().item()
    agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
    return worst, agree


class Reference:
    """transformers' own forward (its default attention) on the check text: `fp32` the logits
    [2, 8, V] in float32 weights; for a bf16/fp16 export, `eager_error` the max logit difference
    of the same model cast to that dtype: what the dtype costs in transformers itself, the scale
    of the export's tolerance. `target` is what the step must match: fp32, or with --quantize,
    transformers' forward with the quantized layers (the expected quantization error is then
    reported, against fp32, as `agreement`, not failed on). `text_fp32`: fp32 logits [T, V] over
    AGREEMENT_TEXT, for that report."""

    def __init__(self, model, ids, dtype, text_ids):
        import torch

        with torch.no_grad():
            self.fp32 = model(input_ids=ids).logits.float()
            self.text_fp32 = model(input_ids=text_ids).logits[0].float()
            self.target, self.eager_error, self.eager_agree = self.fp32, 0.0, 1.0
            if dtype != torch.float32:
                model.to(dtype)
                self.eager_error, self.eager_agree = compare(model(input_ids=ids).logits.float(), self.fp32)

    def quantized(self, model, ids, text_ids, prefill):
        """After the model's layers were quantized: its forward becomes the target (and, over
        `prefill`, [1, V] `prefill_target`: its last token's logits); returns its (max logit
        difference, top-1 agreement) against fp32 over AGREEMENT_TEXT."""
        import torch

        with torch.no_grad():
            self.target = model(input_ids=ids).logits.float()
            self.prefill_target = model(input_ids=prefill).logits[:, -1].float()
            return compare(model(input_ids=text_ids).logits[0].float(), self.text_fp32)

    def at(self, positions):
        import torch

        return torch.stack([self.target[r, positions[r]] for r in range(positions.shape[0])])


# The fixed text of the agreement figures (--quantize): the program decodes it token by token
# and each next-token prediction is compared with fp32 transformers' over the same text.
AGREEMENT_TEXT = (
    "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village by the sea, "
    "there lived an old fisherman who told stories to the children every evening."
)


def check_steps(what, step, layout, dtype, ids, reference, log):
    """check() of the prefills and decodes of step_logits."""
    logits, positions = step_logits(step, layout, dtype, ids)
    return check(what, logits, reference.at(positions), reference, dtype, log)


def prefill_text(text_ids, rows):
    """AGREEMENT_TEXT's ids [1, T], repeated to more than `rows` tokens: a prompt whose prefill
    runs the quantized layers' dequantized path (quantize_lm.PREFILL_ROWS)."""
    return text_ids.repeat(1, rows // text_ids.shape[1] + 1)


def check_prefill(what, step, layout, dtype, ids, reference, log):
    """check() of one call prefilling `ids` [1, T] (the last token's logits) against
    Reference.prefill_target."""
    import torch

    cache = new_cache(layout, 1, ids.shape[1], dtype)
    with torch.no_grad():
        logits = step(ids, torch.arange(ids.shape[1]).view(1, -1), *cache)
    return check(f"{what}, a {ids.shape[1]}-token prefill", logits, reference.prefill_target, reference, dtype, log)


def text_agreement(step, layout, dtype, text_ids, want):
    """The program run over `text_ids` [1, T] one token per call, as a decode does: its logits
    [T, V] against `want` (fp32 transformers'): (max logit difference, top-1 agreement)."""
    import torch

    cache = new_cache(layout, 1, text_ids.shape[1], dtype)
    with torch.no_grad():
        got = [step(text_ids[:, t : t + 1], torch.tensor([[t]]), *cache)[0] for t in range(text_ids.shape[1])]
    return compare(torch.stack(got), want)


# The compiled bf16/fp16 program may be this many times further from fp32 transformers than
# transformers' own forward in that dtype is (Reference.eager_error): both round the same weights
# and activations, in different orders (fused kernels, other accumulation). FP32_TOLERANCE: fp32
# kernels differ from eager's only in summation order.
LOW_PRECISION_MARGIN = 2.0
FP32_TOLERANCE = 1e-3


def check(what, logits, want, reference, dtype, log):
    """The step's (or compiled program's) logits against transformers' `want` (from
    Reference.target): fails the export when further than the dtype's tolerance; logs the
    figures either way."""
    import torch

    worst, agree = compare(logits, want)
    if dtype == torch.float32:
        tolerance, basis = FP32_TOLERANCE, "fp32 tolerance"
    else:
        name = str(dtype).split(".")[-1]
        tolerance = LOW_PRECISION_MARGIN * max(reference.eager_error, 1e-3)
        basis = (f"{LOW_PRECISION_MARGIN:g} x transformers' own {name} error "
                 f"{reference.eager_error:.3g} (top-1 {reference.eager_agree:.0%})")
    against = "fp32 transformers" if reference.target is reference.fp32 else "quantized transformers"
    log(f"{what}: vs {against}, max logit difference {worst:.2g}, top-1 agreement {agree:.0%} "
        f"(tolerance {tolerance:.2g}: {basis})")
    if not worst <= tolerance:
        raise ExportError(
            f"{what}: the exported step does not match transformers' forward (max logit difference "
            f"{worst:.3g}, tolerance {tolerance:.3g}): this model's attention or cache is not one torch-node supports"
        )
    return {"max_logit_difference": float(f"{worst:.3g}"), "tolerance": float(f"{tolerance:.3g}"), "basis": basis}


# --autotune: Inductor's C++ GEMM template, tuned per matmul shape, with the weights frozen into
# its packed layout. Measured 2026-11-26 on the 2-core EPYC (no bf16), SmolLM2-135M fp32, 128
# greedy tokens: one stream 22.6 -> 40.7 tokens/s (node-llama-cpp F32: 29-31); at the export's
# hint (batch 2) the 49152-wide output head takes 4.4 ms against aten's 18.9. The package is
# twice the size (the original weights stay beside the packed ones, unread: unused_constants,
# whose memory the runtime gives back), and a 513-token prompt's first token takes 1.9 s
# instead of 1.0 (the kernels are tuned for decode).
AUTOTUNE_CONFIG = {"freezing": True, "max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN"}


def export_program(layout, step, dtype, max_context, max_batch, path, autotune=False, compile_options=None):
    import torch
    from torch.export import Dim

    # torch.export specializes sizes 0 and 1: example sizes of 2+, all distinct, so that no two
    # dims are guessed equal.
    batch, seq, capacity, kept = 2, 5, 8, 3
    ids = torch.zeros(batch, seq, dtype=torch.long)
    positions = torch.arange(seq).repeat(batch, 1)
    keep = torch.zeros(kept, dtype=torch.long)
    cache = new_cache(layout, batch, capacity, dtype)
    b = Dim("batch", min=1, max=max_batch)
    t = Dim("seq", min=1, max=max_context)
    k = Dim("keep", min=1, max=KEEP_LOGITS)
    c = Dim("context", min=2, max=max_context)
    dynamic = ({0: b, 1: t}, {0: b, 1: t}, {0: k}, tuple({0: b, 2: c} for _ in cache))
    with torch.no_grad():
        program = torch.export.export(step, (ids, positions, keep, *cache), dynamic_shapes=dynamic)
    options = {**(AUTOTUNE_CONFIG if autotune else {}), **(compile_options or {})}
    torch._inductor.aoti_compile_and_package(program, package_path=path, inductor_configs=options or None)


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

    folder, extra = source(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(folder, **extra)
    if extra and not getattr(tokenizer, "chat_template", None):
        # transformers' GGUF loader (5.23) leaves the file's chat template behind: read it here.
        import gguf

        field = gguf.GGUFReader(model_dir).fields.get("tokenizer.chat_template")
        if field is not None:
            tokenizer.chat_template = field.contents()
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


def embedding_note(quantization):
    embedding = quantization["embedding"]
    if embedding is None:
        return f"the embedding table kept in float ({quantization['embedding_kept']})"
    return "the embedding table int8 per row" + (", one copy with the head" if embedding["shared_with_head"] else "")


def kept_note(quantization):
    kept = quantization["kept"]
    if not kept:
        return ""
    return f" ({len(kept)} kept in float: shapes the kernel does not take (quantize_lm.fits_kernel), e.g. {kept[0]})"


def load_model(model_dir, log):
    """transformers' causal-LM class for the folder, fp32, in eval mode (its default attention:
    the reference the checks compare against)."""
    import transformers

    folder, extra = source(model_dir)
    try:
        config = transformers.AutoConfig.from_pretrained(folder, **extra)
    except (ValueError, KeyError) as e:  # a GGUF architecture transformers cannot read
        first = str(e).strip().split("\n")[0]
        raise ExportError(f"{model_dir}: transformers cannot read this model: {first}") from None
    causal_lm_class(config)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype="float32", **extra).eval()
    if extra:
        log(f"{os.path.basename(model_dir)}: {type(model).__name__} read from GGUF (dequantized to float32 by transformers)")
    if type(model)._can_set_experts_implementation():
        model.set_experts_implementation(EXPERTS_IMPLEMENTATION)
    return model


# transformers' experts implementations (integrations/moe.py): its default loops over the experts
# a batch routes to (data-dependent control flow torch.export cannot trace); "batched_mm" gathers
# each token's top-k experts' weights and multiplies in one batched matmul: one program for any
# routing, reading only the routed experts' weights per token at decode.
EXPERTS_IMPLEMENTATION = "batched_mm"


def export(model_dir, out_dir, dtype="float32", max_context=None, max_batch=64, log=print, autotune=False,
           compile_options=None, timings=None, quantize=None, dtype_reason="--dtype"):
    """Exports `model_dir` into `out_dir`; returns the manifest. `compile_options`: Inductor
    options over the defaults (models/make_lm_models.py's fixtures compile faster); `timings`, a
    dict, gets the compile's seconds and the checks' figures."""
    import torch

    timings = {} if timings is None else timings

    if not is_causal_lm(model_dir):
        raise ExportError(f"{model_dir}: not a causal language model (config.json architectures)")
    if dtype not in DTYPES:
        raise ExportError(f"--dtype: expected one of {', '.join(DTYPES)}, got '{dtype}'")
    torch_dtype = getattr(torch, dtype)
    log(f"{os.path.basename(os.path.normpath(model_dir))}: reading the model with transformers (seconds; a GGUF "
        "file: about a minute per GB)")
    model = load_model(model_dir, log)
    model_type = model.config.model_type
    ids = check_ids(model.config)
    from transformers import AutoTokenizer

    text_ids = AutoTokenizer.from_pretrained(source(model_dir)[0], **source(model_dir)[1])(AGREEMENT_TEXT, return_tensors="pt")["input_ids"]
    reference = Reference(model, ids, torch_dtype, text_ids)
    quantization = None
    if quantize:
        import quantize_lm

        log(f"{quantize}: quantizing the linear layers and checking them against transformers (about a minute "
            "for a 135M model)")
        try:
            quantization = quantize_lm.quantize(model, quantize, torch_dtype, getattr(torch, prefill_dtype(dtype)))
        except quantize_lm.QuantizationError as e:
            raise ExportError(str(e)) from None
        prefill = prefill_text(text_ids, quantize_lm.PREFILL_ROWS)
        worst, agree = reference.quantized(model, ids, text_ids, prefill)
        log(f"{quantization['scheme']}: {quantization['layers']} linear layers quantized"
            f"{kept_note(quantization)}, {embedding_note(quantization)}; transformers with "
            f"them vs fp32 over a fixed text ({text_ids.shape[1]} tokens): top-1 agreement {agree:.1%}, "
            f"max logit difference {worst:.3g}")
    # One-row matmuls apart from more (python/decode_gemv.py); --autotune keeps its
    # tuned GEMM templates.
    import decode_gemv

    one_row = 0
    one_row_kernel = decode_gemv.one_row_kernel()
    if not autotune:
        one_row = decode_gemv.wrap(model)
        if one_row:
            how = "a vectorized reduction" if one_row_kernel == "reduction" else "torch_node::rows_linear (no AVX-512)"
            log(f"decode: {one_row} linear layers multiply a single row through {how}")
    if quantization:
        paths = kernels(quantization, one_row_kernel, dtype)
        scheme = "int8" if quantization["group_size"] is None else "int4"
        log(f"{quantization['scheme']}: up to {quantize_lm.PREFILL_ROWS} rows through {paths[scheme]['rows']}, "
            f"one row through {paths[scheme]['one_row']} ({dtype} activations)")
    default_attention = model.config._attn_implementation
    attends_in = attention_dtype(dtype)
    StepState.attention_in_float32 = attends_in != dtype
    register_attention()
    model.set_attn_implementation(ATTENTION)
    layout = shapes(model)
    layers, heads, kv_heads, head_dim = layout
    limit = max_positions(model.config)
    max_context = min(max_context or limit or 2048, limit or max_context or 2048)
    os.makedirs(out_dir, exist_ok=True)

    step = step_module(model)
    check_steps("self-check (eager step)", last_only(step), layout, torch_dtype, ids, reference, log)
    check_keep("self-check (eager step)", step, layout, torch_dtype, ids, reference, log)
    if quantization:
        check_prefill("self-check (eager step)", last_only(step), layout, torch_dtype, prefill, reference, log)
    started = time.time()
    package = os.path.join(out_dir, "model.pt2")
    log(f"model.pt2: torch.export + AOTInductor compile, {compile_estimate(model, quantization, autotune)} "
        "(no output until it ends)")
    export_program(layout, step, torch_dtype, max_context, max_batch, package, autotune, compile_options)
    timings["compile_s"] = round(time.time() - started, 1)
    log(f"model.pt2: torch.export + AOTInductor{' (autotuned)' if autotune else ''} in {time.time() - started:.0f} s")
    # The compiled program against transformers, as the step was: the same prefills and decodes.
    runner = torch._inductor.aoti_load_package(package)
    # Weights the program never reads: NaN in them must change nothing, and the runtime gives
    # their memory back at load (manifest "unused_constants").
    unused = unused_constants(package)
    if unused:
        poison = {n: torch.full(s, float("nan"), dtype=getattr(torch, d)) for n, (_, d, s) in unused.items()}
        runner.loader.update_constant_buffer(poison, False, False)
    compiled = check_steps("compiled check (model.pt2)", last_only(runner), layout, torch_dtype, ids, reference, log)
    check_keep("compiled check (model.pt2)", runner, layout, torch_dtype, ids, reference, log)
    timings["check"] = compiled["max_logit_difference"]
    if quantization:
        quantization["prefill_check"] = check_prefill("compiled check (model.pt2)", last_only(runner), layout,
                                                      torch_dtype, prefill, reference, log)
        worst, agree = text_agreement(last_only(runner), layout, torch_dtype, text_ids, reference.text_fp32)
        quantization["agreement"] = {"text_tokens": text_ids.shape[1], "top1": round(agree, 4),
                                     "max_logit_difference": round(worst, 4), "against": "float32 transformers"}
        log(f"agreement: model.pt2 ({quantization['scheme']}, {dtype}) vs fp32 transformers over a fixed text "
            f"({text_ids.shape[1]} tokens, decoded one at a time): top-1 agreement {agree:.1%}, max logit "
            f"difference {worst:.3g}")
        timings["agreement"] = f"top-1 {agree:.1%}"
    model.set_attn_implementation(default_attention)
    if quantization:
        timings["eager_model"] = model  # the fixtures' goldens: transformers with the quantized layers
    if unused:
        size = sum(t.nbytes for t in poison.values())
        log(f"{len(unused)} weights ({size / 2**20:.0f} MiB) stay in the package unread: released at load")

    tokenizer = write_tokenizer(model_dir, out_dir)
    model.generation_config.save_pretrained(out_dir)
    cache = [f"past.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    manifest = {
        "kind": "causal-lm",
        # 2: the program takes `keep` (its length: how many trailing positions' logits it returns,
        # at most keep_logits) after `positions`; 1 (before it): no `keep`, logits [B, V].
        "format": 2,
        "keep_logits": KEEP_LOGITS,
        "program": "model.pt2",
        "architecture": type(model).__name__,
        "source": "gguf" if source(model_dir)[1] else "transformers",
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
        # Float linear layers wrapped by python/decode_gemv.py (one row apart from more).
        "one_row_layers": one_row,
        # What those layers and the quantized ones run at one row (decode_gemv.one_row_kernel):
        # "reduction" (CPUs with AVX-512: int4 keeps ATen's kernel) or "rows_linear" (torch-node's
        # ops, torch_node::rows_linear and rows_linear_int4_runs); null when no layer is either.
        "one_row_kernel": one_row_kernel if one_row or quantization else None,
        # What the linear layers multiply through (kernels) and what the compiled code needs of
        # the CPU (compiled_for: checked at load).
        "kernels": kernels(quantization, one_row_kernel if one_row or quantization else None, dtype),
        "compiled_for": compiled_for(),
        "dtype_reason": dtype_reason,
        # Weight-only quantization (python/quantize_lm.py): activations and cache stay in `dtype`.
        "quantization": quantization,
        # The compiled check: model.pt2 against transformers on a fixed random text, and the
        # tolerance it passed (fp32: 1e-3; bf16/fp16: from transformers' own error in that dtype).
        "check": compiled,
        "unused_constants": sorted(fqn for fqn, _, _ in unused.values()),
        "sliding_window": sliding_window(model.config),
        "eos_token_ids": eos_ids(model, tokenizer),
        "bos_token_id": tokenizer.bos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "chat_template": bool(getattr(tokenizer, "chat_template", None)),
        "inputs": ["input_ids", "positions", "keep", *cache],
        "outputs": ["logits"],
        "cache": {
            "layout": ["batch", "kv_heads", "context", "head_dim"],
            "dtype": dtype,
            # The dtype the program attends in (attention_dtype: float32 without AMX).
            "attention_dtype": attends_in,
            "update": "in place at positions[b, t]; token (b, t) attends to slots 0..=positions[b, t]",
        },
    }
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def missing_packages():
    """The packages this script needs that the running Python lacks."""
    return [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir")
    p.add_argument("out_dir")
    p.add_argument("--dtype", default=None, choices=DTYPES,
                   help="activations and cache (default: float32; with --quantize, bfloat16 where the CPU has "
                        "avx512_bf16 or amx_bf16)")
    p.add_argument("--max-context", type=int, default=None, help="longest sequence (default: the model's)")
    p.add_argument("--max-batch", type=int, default=64, help="most sequences in one step")
    p.add_argument("--quantize", choices=["int8", "int4", "int4-g32", "int4-g128"],
                   help="weight-only: int8 per output channel, int4 in groups of 32 (int4, int4-g32) or 128")
    p.add_argument("--autotune", action="store_true",
                   help="tune each matmul (Inductor's C++ GEMM template, frozen weights): faster decode, "
                        "a package twice the size on disk")
    args = p.parse_args(argv)
    missing = missing_packages()
    if missing:
        # Exit 3: the CLI (lib/cli.js) turns this line into its own, naming $PYTHON.
        print(f"export_causal_lm: missing Python packages: {', '.join(missing)} "
              f"(install: {sys.executable} -m pip install {' '.join(missing)})", file=sys.stderr)
        return 3
    dtype, why = (args.dtype, "--dtype") if args.dtype else default_dtype(args.quantize)
    print(f"activations and cache: {dtype} ({why})")
    try:
        export(args.model_dir, args.out_dir, dtype, args.max_context, args.max_batch, autotune=args.autotune,
               quantize=args.quantize, dtype_reason=why)
    except ExportError as e:
        print(f"export_causal_lm: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
