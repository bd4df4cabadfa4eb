"""Weight-only quantization of a transformers causal LM for python/export_causal_lm.py's
--quantize: each linear layer (nn.Linear, and GPT-2's transposed Conv1D) becomes a
QuantizedLinear that keeps its weight as int8 or int4 and multiplies through PyTorch's own CPU
kernels, which AOTInductor calls from the compiled program:

  int8        per output channel, symmetric: w = q * scale, q in [-127, 127];
              aten._weight_int8pack_mm(x, q [N, K] int8, scale [N])
  int4 (g32,  per group of 32 (or 128) inputs of each output channel, asymmetric:
  g128)       w = (q - 8) * scale + zero, q in [0, 15], zero = min + 8 * scale (the tinygemm
              layout); aten._weight_int4pack_mm_for_cpu(x, packed [N, K/2] uint8, group,
              scales_and_zeros [K/group, N, 2]), the weight packed by
              aten._convert_weight_to_int4pack_for_cpu

Activations, biases, norms, embeddings and the cache stay in the export's dtype (the manifest's
`dtype`); so do mixture-of-experts' expert weights (3-D parameters, not linear layers). A tied
output head is quantized as its own copy: the embedding table still needs the float rows.
torchao (0.18 on PyPI) has these schemes too; it is not a dependency of the provisioned venv,
and these two kernels are all the schemes need.
"""

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
    import torch

    class QuantizedLinear(torch.nn.Module):
        """y = x W^T + b with W int8 (per output channel) or int4 (groups), x in `dtype`."""

        def __init__(self, weight, bias, dtype, group):
            super().__init__()
            out_features, in_features = weight.shape
            self.in_features, self.out_features, self.group = in_features, out_features, group
            if group is None:
                scale = weight.abs().amax(1).clamp(min=1e-12) / 127
                q = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
                self.register_buffer("qweight", q)
                self.register_buffer("scales", scale.to(dtype))
            else:
                w = weight.reshape(out_features, in_features // group, group)
                low, high = w.amin(-1), w.amax(-1)
                scale = (high - low).clamp(min=1e-12) / 15
                q = torch.round((w - low[..., None]) / scale[..., None]).clamp(0, 15).to(torch.int32)
                packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.reshape(out_features, in_features), 1)
                zero = low + 8 * scale
                self.register_buffer("qweight", packed)
                self.register_buffer("scales", torch.stack([scale, zero], -1).transpose(0, 1).contiguous().to(dtype))
            self.bias = None if bias is None else torch.nn.Parameter(bias.detach().to(dtype), requires_grad=False)

        def forward(self, x):
            flat = x.reshape(-1, self.in_features)
            if self.group is None:
                y = torch.ops.aten._weight_int8pack_mm(flat, self.qweight, self.scales)
            else:
                y = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.qweight, self.group, self.scales)
            y = y.reshape(*x.shape[:-1], self.out_features)
            return y if self.bias is None else y + self.bias

    return QuantizedLinear


def quantize(model, scheme, dtype):
    """Replaces `model`'s linear layers in place; returns {"scheme", "group_size", "layers",
    "kept": [names of linear layers left in `dtype`]}: with int4, a layer stays when the group
    does not divide its inputs, or 16 its outputs."""
    import torch

    if scheme not in SCHEMES:
        raise QuantizationError(f"--quantize: expected one of {', '.join(SCHEMES)}, got '{scheme}'")
    group = SCHEMES[scheme]
    QuantizedLinear = _make_module()
    done, kept = [], []
    for name, module in list(model.named_modules()):
        found = _linear_weight(module)
        if found is None:
            continue
        weight, bias = found
        # int4's packing takes outputs in multiples of 16 (_convert_weight_to_int4pack_for_cpu).
        if group is not None and (weight.shape[1] % group or weight.shape[0] % 16):
            kept.append(name)
            continue
        with torch.no_grad():
            q = QuantizedLinear(weight, bias, dtype, group)
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, attr, q)
        done.append(name)
    if not done:
        raise QuantizationError(f"--quantize {scheme}: the model has no linear layer to quantize")
    return {"scheme": scheme_name(scheme), "group_size": group, "layers": len(done), "kept": kept}
