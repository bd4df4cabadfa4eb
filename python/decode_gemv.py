"""One-row matmuls of python/export_causal_lm.py's program as Inductor reductions.

A decode step of one sequence multiplies one row by every weight matrix: a matrix-vector product
that reads each weight once, bound by memory bandwidth. ATen sends it to MKL, and MKL, on a CPU
it does not take for Intel's, runs its generic code (`mkl_blas_def_xsgemv`, and for bf16
`mkl_blas_def_xgemv_bf16bf16f32` in `perf`): far from the bound. Written as a reduction
(`(w * x).sum(-1)`, accumulating in float32), Inductor generates a vectorized kernel that
streams the weight once. Measured 2026-11-27 on the 2-core AMD EPYC (Zen 4, avx512_bf16, no
AMX; loaded: a core burner and a test run beside it), one thread, SmolLM2-135M's 30 layers x 7
linear shapes with distinct weights, each compiled whole, one row:

  float32  (425 MB)  aten (MKL) 179 ms, reduction 68 ms
  bfloat16 (212 MB)  aten (MKL)  83 ms, reduction 13 ms
  float32 head [49152 x 576], one matrix: aten 24.9 ms, reduction 9.1 ms

On a CPU without AVX-512, one row takes torch_node::rows_linear as well (one_row_kernel).

At 2 and more rows the same reduction re-reads the weight for each row (4 rows: 156 ms against
aten's 103 in bf16), so each wrapped layer chooses in the program, on its rows: one row takes the
reduction, more rows (prefill, batched decode) the op torch_node::rows_linear (torch.cond; both
branches read the one weight, so the program holds no second copy). --autotune exports keep
their tuned GEMM templates (not wrapped).

torch_node::rows_linear is torch-node's own kernel (crates/core/src/shim/rows_linear.cpp,
registered by the runtime before a program loads): up to 16 rows it reads each weight once for
all of them, where ATen's GEMM takes 2-3x longer (measured 2026-11-28 on an AMD EPYC, Zen 3,
AVX2, quiet, 2 threads, SmolLM2's shapes, 10 layers x 7 weights, 8 rows: float32 aten 34.5 ms,
the kernel 14.7; the [49152 x 576] head 36.2 against 12.7; int8 weights 15.6 against 10.8);
past 16 rows of float weights it calls ATen's linear. Here, for the export and its checks, the
op is ATen's linear (int8: over the dequantized weight): the same product, summed in another
order.
"""

_ROWS_OP = []


def one_row_kernel():
    """What a one-row product runs on this CPU (the export's program is compiled for it):
    "reduction" where it has AVX-512, "rows_linear" (torch_node::rows_linear) where it has not.
    Inductor vectorizes the reduction over an int8 weight well only with AVX-512, and the op
    reads each weight faster without it. Measured 2026-11-28 on an AMD EPYC (Zen 3, AVX2 + FMA,
    no AVX-512), quiet, 2 threads, SmolLM2's 30 layers x 7 weights and its head, one row:
    float32 compiled reduction 51-60 ms, the op 35.7; int8 reduction 139 ms, the op 26.6
    (aten._weight_int8pack_mm 120)."""
    from cpu_flags import cpu_flags

    return "reduction" if "avx512f" in cpu_flags() else "rows_linear"


def rows_op():
    """torch.ops.torch_node.rows_linear(x [M, K], w [N, K], scales [N] or None) -> [M, N] in x's
    dtype; `scales` with (and only with) an int8 `w`. Registered here once per process."""
    import torch

    if not _ROWS_OP:
        @torch.library.custom_op("torch_node::rows_linear", mutates_args=())
        def rows_linear(x: torch.Tensor, w: torch.Tensor, scales: torch.Tensor | None = None) -> torch.Tensor:
            if scales is None:
                return torch.nn.functional.linear(x, w)
            return torch.nn.functional.linear(x.float(), w.float() * scales.float()[:, None]).to(x.dtype)

        @rows_linear.register_fake
        def _(x, w, scales=None):
            return x.new_empty(x.shape[0], w.shape[0])

        _ROWS_OP.append(torch.ops.torch_node.rows_linear)
    return _ROWS_OP[0]


def _float_linear(module):
    """(weight [out, in], bias or None, shared) of an nn.Linear (its own Parameter: a tied head
    stays tied) or transformers' Conv1D (a transposed contiguous copy: the reduction reads rows);
    None for any other module."""
    import torch
    from transformers.pytorch_utils import Conv1D

    if isinstance(module, torch.nn.Linear):
        return module.weight, module.bias
    if isinstance(module, Conv1D):
        weight = torch.nn.Parameter(module.weight.detach().t().contiguous(), requires_grad=False)
        return weight, module.bias
    return None


def one_row(flat, weight, scales=None):
    """flat [rows, K] (one row: a torch.cond branch taken at rows < 2, so the row count stays
    symbolic) times weight [N, K] (float; or int8 times `scales` [N] per output channel):
    [rows, N] in flat's dtype, accumulated in float32."""
    y = (weight.float() * flat[0].float()).sum(-1)
    if scales is not None:
        y = y * scales.float()
    return y.to(flat.dtype).unsqueeze(0).expand(flat.shape[0], -1).clone()


def _make_module():
    import torch

    op = rows_op()
    by_op = one_row_kernel() == "rows_linear"

    def rows(flat, weight):
        return op(flat, weight)

    class DecodeLinear(torch.nn.Module):
        """y = x W^T + b: one row through the reduction (or the op: one_row_kernel), more
        through torch_node::rows_linear."""

        def __init__(self, weight, bias):
            super().__init__()
            self.out_features, self.in_features = weight.shape
            self.weight, self.bias = weight, bias

        def forward(self, x):
            flat = x.reshape(-1, self.in_features)
            if by_op:
                y = rows(flat, self.weight)
            else:
                # A copy, not the view of x (see quantize_lm.QuantizedLinear.forward: dynamo's
                # alias guard would tie the export's dynamic rows to a constant).
                y = torch.cond(flat.shape[0] < 2, one_row, rows, (flat.clone(), self.weight))
            y = y.reshape(*x.shape[:-1], self.out_features)
            return y if self.bias is None else y + self.bias

    return DecodeLinear


def wrap(model):
    """Replaces `model`'s float linear layers (nn.Linear, Conv1D; not python/quantize_lm.py's
    QuantizedLinear) in place; returns how many."""
    DecodeLinear = _make_module()
    done = 0
    for name, module in list(model.named_modules()):
        found = _float_linear(module)
        if found is None or not found[0].is_floating_point():
            continue
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, attr, DecodeLinear(*found))
        done += 1
    return done
