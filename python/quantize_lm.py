"""Weight-only quantization of a transformers causal LM for python/export_causal_lm.py's
--quantize: each linear layer (nn.Linear, and GPT-2's transposed Conv1D) becomes a
QuantizedLinear that keeps its weight as int8 or int4 and multiplies through PyTorch's own CPU
kernels, which AOTInductor calls from the compiled program:

  int8        per output channel, symmetric: w = q * scale, q in [-127, 127];
              torch_node::rows_linear(x, q [N, K] int8, scale [N]) (decode_gemv.rows_op:
              torch-node's kernel, faster than aten._weight_int8pack_mm at 8 rows)
  int4 (g32,  per group of 32 (or 128) inputs of each output channel, asymmetric:
  g128)       w = (q - 8) * scale + zero, q in [0, 15], zero = min + 8 * scale (the tinygemm
              layout); aten._weight_int4pack_mm_for_cpu(x, packed [N, K/2] uint8, group,
              scales_and_zeros [K/group, N, 2]), the weight packed by
              aten._convert_weight_to_int4pack_for_cpu (with float32 activations, and
              on a CPU without AVX-512: torch_node::rows_linear_int4_runs over the same
              layout, int4_rows_op; int4_kernel says which)

Activations, biases, norms and the cache stay in the export's dtype (the manifest's `dtype`); so
do mixture-of-experts' expert weights (3-D parameters, not linear layers). The input embedding
table is stored int8 per row (symmetric, QuantizedEmbedding: a gathered row is q * scale in the
export's dtype), which is int8's per-output-channel scheme for the same matrix: with `int8` and a
tied output head the two share one int8 copy; otherwise (`int4`, an untied head) the table gets
its own. SmolLM2-135M's table is 113 MB in float32, 28 MB as int8 (46% of the int8 export before).
A table of another class (one whose forward does more than gather: Gemma 3's scaled embedding is
taken, its scale applied after) or with max_norm stays in float, and so does a tied one whose head
stays in float (fits_kernel): the float rows are kept for the head anyway.
torchao (0.18 on PyPI) has these schemes too; it is not a dependency of the provisioned venv,
and these two kernels are all the schemes need.

One row (a decode step of one sequence) multiplies an int8 layer through
decode_gemv.one_row instead of the kernel where the CPU has AVX-512: the same reduction as the
float layers', over the int8 weight and its scales (in the loaded measurement of decode_gemv.py,
SmolLM2's 30 layers as int8, bf16 activations, one thread: aten's kernel 47 ms, reduction 26
ms). Without AVX-512 one row takes torch_node::rows_linear too (decode_gemv.one_row_kernel:
there the reduction is 5x slower than the op).

Those kernels read the quantized weight once per row block of the input, so their time grows
with the rows almost as a GEMV's per row: a prompt of hundreds of tokens costs about as many
one-row steps. Past PREFILL_ROWS rows (a prefill, a large batch) a layer instead dequantizes its
weight (one fused pass over it) and multiplies through the GEMM of `prefill_dtype`; both
branches are compiled into the program (torch.cond on the rows). int4 does so where its packed
layout is known (int4_block; else the layer keeps its kernel at every size), and keeps its
scales and zeros a second time, unpacked (a quarter of its weights' bytes at groups of 32, bf16).
With float32 activations, and on a CPU without AVX-512 (int4_kernel), an int4 layer whose
layout is known multiplies up to PREFILL_ROWS rows through torch_node::rows_linear_int4_runs over the same packed
weight, with its scales and offsets laid out by int4_runs (float32, their only copy: ATen's
kernel and its scales are not kept), which its prefill reads back: ATen's int4 kernel is
vectorized for AVX-512 only (measured 2026-11-28 on an AMD EPYC, Zen 3, AVX2, quiet, 2 threads:
SmolLM2's 30 layers and head at one row, ATen 181 ms, the op 21.5 ms over [K/group, N] scales
and zeros, 12.9-13.4 ms over the runs; at 8 rows 1,273 against 53 ms).
Measured 2026-11-27 on the 2-core AMD EPYC (Zen 4, avx512_bf16, no AMX; loaded: a core burner
and a test run beside it), bf16 activations, one [1536 x 576] layer: int8 kernel 0.03 / 0.10 / 0.39 / 0.75 / 14.3 ms at 1 / 8 /
32 / 64 / 512 rows, bf16 GEMM on a bf16 weight 0.09 / 0.12 / 0.23 / 0.35 / 8.0 ms; int4 (groups
of 32) kernel 0.93 / 1.61 / 4.47 / 13.8 ms at 33 / 64 / 128 / 512 rows, dequantized 0.65 / 1.04 /
1.63 / 6.0 ms (one thread, CI running beside).
"""

# A layer multiplies through its dequantized weight past this many rows (see above).
PREFILL_ROWS = 32

SCHEMES = {"int8": None, "int4": 32, "int4-g32": 32, "int4-g128": 128}


def scheme_name(scheme):
    return "int4-g32" if scheme == "int4" else scheme


class QuantizationError(Exception):
    pass


def _linear_weight(module):
    """(weight [out, in] float32, bias or None) of an nn.Linear or transformers' Conv1D."""
    import torch
    from transformers.pytorch_utils import Conv1D

    if isinstance(module, torch.nn.Linear):
        return module.weight.detach().float(), module.bias
    if isinstance(module, Conv1D):
        return module.weight.detach().float().t().contiguous(), module.bias
    return None


def _make_module():
    import decode_gemv
    import torch

    class QuantizedLinear(torch.nn.Module):
        """y = x W^T + b with W int8 (per output channel) or int4 (groups), x in `dtype`; past
        PREFILL_ROWS rows through W dequantized to `prefill_dtype` (None: never; an int4 layer
        whose packing int4_block does not know: never)."""

        def __init__(self, weight, bias, dtype, group, prefill_dtype):
            super().__init__()
            out_features, in_features = weight.shape
            self.in_features, self.out_features, self.group = in_features, out_features, group
            self.prefill_dtype = prefill_dtype
            # int4_block's rows per block of the packed weight (int4 with a prefill dtype only).
            self.block = None
            # torch_node::rows_linear_int4_runs's scales and offsets (int4 without AVX-512 only).
            self.register_buffer("runs", None)
            if group is None:
                q, scale = int8_rows(weight, dtype)
                self.register_buffer("qweight", q)
                self.register_buffer("scales", scale)
            else:
                w = weight.reshape(out_features, in_features // group, group)
                low, high = w.amin(-1), w.amax(-1)
                scale = (high - low).clamp(min=1e-12) / 15
                q = torch.round((w - low[..., None]) / scale[..., None]).clamp(0, 15).to(torch.int32)
                q = q.reshape(out_features, in_features)
                packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
                zero = low + 8 * scale
                scales_and_zeros = torch.stack([scale, zero], -1).transpose(0, 1).contiguous().to(dtype)
                self.register_buffer("qweight", packed)
                self.register_buffer("scales", scales_and_zeros)
                self.block = int4_block(packed, q) if prefill_dtype is not None else None
                if self.block is None:
                    self.prefill_dtype = None
                elif int4_kernel(dtype) == "rows_linear_int4_runs":
                    # Made from the scales and zeros in `dtype`, as ATen's kernel reads them; the
                    # only copy this layer keeps (neither ATen's kernel nor its layout is used).
                    del self.scales
                    self.runs = int4_runs(scales_and_zeros[..., 0], scales_and_zeros[..., 1], self.block)
                else:
                    # The kernel's operand as a tensor (see branches), and the scales and zeros
                    # again, each [K/group, N] contiguous: read interleaved, Inductor's
                    # dequantizing loop does not vectorize (1.7 against 0.22 ms for a 1536 x 576
                    # layer, measured 2026-11-27 on the AMD EPYC, one thread, loaded).
                    self.register_buffer("group_size", torch.tensor(group, dtype=torch.int64))
                    self.register_buffer("prefill_scales", scales_and_zeros[..., 0].contiguous())
                    self.register_buffer("prefill_zeros", scales_and_zeros[..., 1].contiguous())
            self.bias = None if bias is None else torch.nn.Parameter(bias.detach().to(dtype), requires_grad=False)

        def branches(self):
            """(quantized, dequantized): y [M, N] from (flat [M, K], *self.operands()), as plain
            functions closing over no tensor (torch.cond traces its branches with dynamo, which
            guards the tensors they reach). int8's `quantized` takes one row through
            decode_gemv's reduction (rows < 2), more through the kernel; without AVX-512 every
            row count through torch-node's ops (int4: where int4_block read its layout)."""
            group, dtype = self.group, self.prefill_dtype
            n, k, block = self.out_features, self.in_features, self.block

            rows = decode_gemv.rows_op()
            # Without AVX-512, torch-node's ops take every row count up to PREFILL_ROWS; int4
            # layers laid out as runs (int4_kernel) take torch-node's op on every CPU.
            by_op = decode_gemv.one_row_kernel() == "rows_linear"
            rows4 = int4_rows_op() if self.runs is not None else None

            def kernel(flat, qweight, scales):
                return rows(flat, qweight, scales)

            def quantized(flat, qweight, scales, *int4):
                if group is None and by_op:
                    return kernel(flat, qweight, scales)
                if rows4 is not None:
                    return rows4(flat, qweight, scales, group, block)  # `scales`: the runs
                if group is None:
                    return torch.cond(flat.shape[0] < 2, decode_gemv.one_row, kernel, (flat.clone(), qweight, scales))
                if not int4:
                    return torch.ops.aten._weight_int4pack_mm_for_cpu(flat, qweight, group, scales)
                # The op _weight_int4pack_mm_for_cpu lowers to, with the group size as an operand:
                # lowered inside a torch.cond branch, the aten op's group-size constant is never
                # declared in the branch's code (AOTInductor, torch 2.13: the C++ does not compile).
                return torch.ops.quantized.int4mm_packed_weight_cpu(flat, qweight, int4[0], scales)

            def dequantized(flat, qweight, scales, *int4):
                if group is None:
                    w = qweight.to(dtype) * scales.to(dtype)[:, None]
                    return torch.nn.functional.linear(flat.to(dtype), w).to(flat.dtype)
                if rows4 is not None:
                    return int4_runs_dequantized_mm(flat, qweight, scales, n, k, group, block, dtype)
                return int4_dequantized_mm(flat, qweight, int4[1], int4[2], n, k, group, block, dtype)

            return quantized, dequantized

        def operands(self):
            """The tensors the branches take after the input rows."""
            if self.runs is not None:
                return (self.qweight, self.runs)
            if self.group is None or self.prefill_dtype is None:
                return (self.qweight, self.scales)
            return (self.qweight, self.scales, self.group_size, self.prefill_scales, self.prefill_zeros)

        def forward(self, x):
            flat = x.reshape(-1, self.in_features)
            quantized, dequantized = self.branches()
            if self.prefill_dtype is None:
                y = quantized(flat, *self.operands())
            else:
                # A copy, not the view of x: torch.cond traces its branches with dynamo, which
                # guards an input that aliases another tensor by its size, and that guard ties the
                # export's dynamic rows to constants ("Constraints violated (seq)").
                operands = (flat.clone(), *self.operands())
                y = torch.cond(flat.shape[0] > PREFILL_ROWS, dequantized, quantized, operands)
            y = y.reshape(*x.shape[:-1], self.out_features)
            return y if self.bias is None else y + self.bias

    return QuantizedLinear


def _make_embedding():
    import torch

    class QuantizedEmbedding(torch.nn.Module):
        """An embedding table int8 per row: row i = qweight[i] * scales[i] (times `embed_scale`,
        where the table it replaces had one: Gemma 3's scaled embedding), in `dtype`."""

        def __init__(self, qweight, scales, dtype, embed_scale):
            super().__init__()
            self.dtype = dtype
            self.register_buffer("qweight", qweight)
            self.register_buffer("scales", scales)
            self.register_buffer("embed_scale", embed_scale, persistent=False)

        def forward(self, ids):
            rows = self.qweight[ids].to(self.dtype) * self.scales[ids].to(self.dtype).unsqueeze(-1)
            return rows if self.embed_scale is None else rows * self.embed_scale.to(self.dtype)

    return QuantizedEmbedding


def int4_kernel(dtype):
    """What an int4 layer (whose packing int4_block reads) multiplies up to PREFILL_ROWS rows
    through, with activations in `dtype` on this CPU: "aten" (aten._weight_int4pack_mm_for_cpu)
    for bfloat16 or float16 activations where the CPU has AVX-512, the case ATen's vectorized code
    serves (SmolLM2 int4 with bf16 activations: 112-117 tokens/s on an AMD EPYC Zen 4,
    avx512_bf16, 2026-11-29); "rows_linear_int4_runs" (torch-node's op, which picks its kernel
    by the CPU it runs on) for float32 activations on every CPU (ATen's kernel with float32
    activations ran the same model at 7.7-7.9 tokens/s on that Zen 4: 0.17x node-llama-cpp) and
    for any activations without AVX-512 (ATen's kernel is vectorized for AVX-512 only)."""
    import decode_gemv
    import torch

    if dtype == torch.float32 or decode_gemv.one_row_kernel() == "rows_linear":
        return "rows_linear_int4_runs"
    return "aten"


def int8_rows(weight, dtype):
    """(q [N, K] int8, scale [N] in `dtype`): `weight` [N, K] int8 per row, symmetric: the int8
    scheme of QuantizedLinear and QuantizedEmbedding."""
    import torch

    scale = weight.abs().amax(1).clamp(min=1e-12) / 127
    q = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale.to(dtype)


def quantize_embedding(model, dtype, tied, head):
    """Replaces `model`'s input embedding table with a QuantizedEmbedding; `tied`: the table was
    the output head's weight, `head`: that head now (a QuantizedLinear with int8 weights shares
    them). Returns (the manifest's `quantization.embedding`: {"scheme": "int8", "per": "row",
    "shared_with_head"}, None), or (None, why the table stays in float)."""
    import torch

    table = model.get_input_embeddings()
    if type(table).__name__.endswith("ScaledWordEmbedding") and hasattr(table, "embed_scale"):
        embed_scale = table.embed_scale
    elif type(table) is torch.nn.Embedding:
        embed_scale = None
    else:
        return None, f"its class {type(table).__name__} is not nn.Embedding"
    if table.max_norm is not None:
        return None, "it has max_norm"
    if tied and not hasattr(head, "qweight"):  # the head is not a QuantizedLinear
        return None, "the tied output head stays in float"
    shared = tied and head.group is None
    if shared:
        qweight, scales = head.qweight, head.scales
    else:
        qweight, scales = int8_rows(table.weight.detach().float(), dtype)
    model.set_input_embeddings(_make_embedding()(qweight, scales, dtype, embed_scale))
    return {"scheme": "int8", "per": "row", "shared_with_head": shared}, None


_INT4_ROWS_OP = []


def int4_rows_op():
    """torch.ops.torch_node.rows_linear_int4_runs(x [M, K], packed [N, K/2] uint8, runs [N/32,
    K/group, 64] float32, group, block) -> [M, N] in x's dtype: torch-node's int4 kernel
    (crates/core/src/shim/rows_linear_int4.cpp, registered by the runtime before a program loads),
    which reads `packed` in int4_block's layout and the scales and offsets as int4_runs lays them
    out. Here, for the export and its checks, it is int4_runs_dequantized_mm in float32: the same
    product, summed in another order. Registered once per process."""
    import torch

    if not _INT4_ROWS_OP:
        @torch.library.custom_op("torch_node::rows_linear_int4_runs", mutates_args=())
        def rows_linear_int4_runs(x: torch.Tensor, packed: torch.Tensor, runs: torch.Tensor, group: int,
                                  block: int) -> torch.Tensor:
            n, k = packed.shape[0], x.shape[1]
            return int4_runs_dequantized_mm(x, packed, runs, n, k, group, block, torch.float32).to(x.dtype)

        @rows_linear_int4_runs.register_fake
        def _(x, packed, runs, group, block):
            return x.new_empty(x.shape[0], packed.shape[0])

        _INT4_ROWS_OP.append(torch.ops.torch_node.rows_linear_int4_runs)
    return _INT4_ROWS_OP[0]


def int4_runs(scales, zeros, block):
    """The scales and zeros [K/group, N] of a weight in int4_block's layout as the op's `runs`
    [N/32, K/group, 64] float32: the kernel reads 32 channels at a time (16 low nibbles and the
    16 high ones of a block: channels nb*block + c*16 + [0, 16) and those plus block/2), and for
    each group the run's 32 scales then its 32 offsets (zero - 8 * scale: w = q * scale +
    offset) lie together, so a run reads its scales in one stream with its weights
    (crates/core/src/shim/rows_linear_int4.cpp says what that gains)."""
    import torch

    s = scales.float()
    offsets = zeros.float() - 8 * s
    g, n = s.shape

    def by_run(t):  # [g, n = nb*block + half*block/2 + c*16 + j] -> [nb, c, g, half, j]
        return t.reshape(g, n // block, 2, block // 32, 16).permute(1, 3, 0, 2, 4)

    return torch.cat([by_run(s), by_run(offsets)], 3).reshape(n // 32, g, 64).contiguous()


def int4_runs_dequantized_mm(flat, qweight, runs, n, k, group, block, dtype):
    """int4_dequantized_mm over int4_runs's layout: the scales and offsets back as [K/group, N]
    (a view the compiled loop reads in place)."""
    import torch

    g = k // group
    torch._check(runs.shape[0] == n // 32)
    torch._check(runs.shape[1] == g)
    v = runs.reshape(n // block, block // 32, g, 2, 2, 16)
    scales, offsets = (v[:, :, :, i].permute(2, 0, 3, 1, 4).reshape(g, n) for i in (0, 1))
    return int4_dequantized_mm(flat, qweight, scales, offsets, n, k, group, block, dtype, zero_point=0)


def int4_block(packed, q):
    """The block of output rows B in which _convert_weight_to_int4pack_for_cpu laid out `packed`
    [N, K/2] from `q` [N, K] (values 0..15): byte (nb, k, j) holds q[nb*B + j, k] in its low
    nibble and q[nb*B + j + B/2, k] in its high one (B = 64 with AVX512, measured on the AMD
    EPYC); None where no such B reproduces `q` exactly (another CPU's layout, N not a multiple
    of B): that layer then keeps its kernel at every size."""
    import torch

    out_features, in_features = q.shape
    for block in (64, 32):
        if out_features % block:
            continue
        halves = int4_halves(packed, out_features, in_features, block)
        unpacked = torch.cat(halves, -1).permute(0, 2, 1).reshape(out_features, in_features)
        if torch.equal(unpacked.to(q.dtype), q):
            return block
    return None


def int4_halves(packed, n, k, block):
    """The two halves of each block of output rows in `packed` [N, K/2] laid out as int4_block
    says: (first, second), each [N/block, K, block/2] of values 0..15 (N, K as Python ints: in a
    traced branch the operand's sizes are symbolic)."""
    v = packed.reshape(n // block, k, block // 2)
    return v & 15, v >> 4


def int4_dequantized_mm(flat, qweight, scales, zeros, n, k, group, block, dtype, zero_point=8):
    """flat [M, K] times the int4 weight, w = (q - zero_point) * scale + zero, dequantized to
    `dtype` in one pass over `qweight`
    (int4_block's layout: within each block of output rows, the low nibbles hold its first half
    and the high nibbles its second), as two GEMMs whose outputs interleave back: each half of
    the weight is written [K, N/2] with its output rows innermost, read in the order they are
    stored. `scales`, `zeros` [K/group, N]. The shapes are checked so that the traced branch
    knows them (torch.cond's operands arrive with symbolic sizes)."""
    import torch

    torch._check(qweight.shape[0] == n)
    torch._check(qweight.shape[1] == k // 2)
    torch._check(scales.shape[0] == k // group)
    torch._check(scales.shape[1] == n)
    torch._check(zeros.shape[0] == k // group)
    torch._check(zeros.shape[1] == n)
    nb, half = n // block, block // 2
    s = scales.to(dtype).reshape(k // group, nb, 2, half).permute(1, 0, 2, 3)[:, :, None]
    z = zeros.to(dtype).reshape(k // group, nb, 2, half).permute(1, 0, 2, 3)[:, :, None]
    x = flat.to(dtype)
    halves = []
    for i, nibble in enumerate(int4_halves(qweight, n, k, block)):
        w = (nibble.reshape(nb, k // group, group, half).to(dtype) - zero_point) * s[..., i, :] + z[..., i, :]
        w = w.reshape(nb, k, half).permute(1, 0, 2).reshape(k, n // 2)
        halves.append(torch.mm(x, w).reshape(-1, nb, 1, half))
    return torch.cat(halves, 2).reshape(-1, n).to(flat.dtype)


def fits_kernel(shape, group, dtype):
    """Whether the kernel takes a weight [N, K]: int4's packing takes outputs in multiples of 16
    and inputs in whole groups (_convert_weight_to_int4pack_for_cpu); the int8 kernel with
    reduced-precision activations crashes (SIGSEGV, torch 2.13 on the AMD EPYC, Zen 4) on two
    rows or more when K is not a multiple of 16 (K 168, 172, 180; 160 and 176 run; float32
    activations run at any K)."""
    import torch

    out_features, in_features = shape
    if group is not None:
        return in_features % group == 0 and out_features % 16 == 0
    return dtype == torch.float32 or in_features % 16 == 0


def quantize(model, scheme, dtype, prefill_dtype=None):
    """Replaces `model`'s linear layers in place; returns {"scheme", "group_size", "layers",
    "kept": [names of linear layers left in `dtype`: those the kernel does not take
    (fits_kernel)], "prefill", "embedding", "embedding_kept"}, and the input embedding table's
    (quantize_embedding: "embedding", or "embedding_kept", why it stays in float). `prefill_dtype`
    (a torch dtype, or None for the quantized kernels at any rows): what layers multiply in past
    PREFILL_ROWS rows; "prefill" says so ({"rows_over", "dtype", "layers"}), or is None."""
    import torch

    if scheme not in SCHEMES:
        raise QuantizationError(f"--quantize: expected one of {', '.join(SCHEMES)}, got '{scheme}'")
    group = SCHEMES[scheme]
    QuantizedLinear = _make_module()
    done, kept = [], []
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is model.get_input_embeddings().weight
    for name, module in list(model.named_modules()):
        found = _linear_weight(module)
        if found is None:
            continue
        weight, bias = found
        if not fits_kernel(weight.shape, group, dtype):
            kept.append(name)
            continue
        with torch.no_grad():
            q = QuantizedLinear(weight, bias, dtype, group, prefill_dtype)
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, attr, q)
        done.append(name)
    if not done:
        raise QuantizationError(f"--quantize {scheme}: the model has no linear layer to quantize")
    embedding, why = quantize_embedding(model, dtype, tied, model.get_output_embeddings())
    dequantizing = sum(1 for m in model.modules() if isinstance(m, QuantizedLinear) and m.prefill_dtype is not None)
    prefill = None
    if dequantizing:
        prefill = {"rows_over": PREFILL_ROWS, "dtype": str(prefill_dtype).split(".")[-1], "layers": dequantizing}
    return {"scheme": scheme_name(scheme), "group_size": group, "layers": len(done), "kept": kept, "prefill": prefill,
            "embedding": embedding, "embedding_kept": why}
