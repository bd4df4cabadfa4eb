"""What the export scripts (export_text.py, export_clip.py, export_dense.py) share: their common
command-line options and exit statuses, progress lines, the hash that lets the fixture scripts skip
an unchanged export, the folder they write into and the AOTInductor / TorchScript program files."""

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time

# PIL resample codes (a processor config's `resample`) as F.interpolate modes.
RESAMPLE = {2: "bilinear", 3: "bicubic"}


class Unsupported(Exception):
    """The model cannot be exported by this script (exit 2)."""


def log(message):
    """Progress goes to stdout; stderr carries failures (one line) and Python's own warnings."""
    print(message, flush=True)


def fail(prog, status, message):
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    sys.exit(status)


def missing_packages():
    """The packages the export scripts need that the running Python lacks."""
    return [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]


def parser(prog, description, model_dir_help, max_batch):
    """The arguments every export script takes: MODEL_DIR OUT_DIR, --format, --max-batch, --fast-compile."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("model_dir", help=model_dir_help)
    p.add_argument("out_dir", help="the torch-node model folder to write")
    p.add_argument("--format", choices=("auto", "pt2", "torchscript"), default="auto",
                   help="auto: .pt2, TorchScript where torch.export fails (default)")
    p.add_argument("--max-batch", type=int, default=max_batch,
                   help=f"largest batch the .pt2 accepts (default {max_batch})")
    p.add_argument("--fast-compile", action="store_true",
                   help="compile the .pt2's C++ wrapper at -O0 (the kernels as usual): a quicker export "
                        "whose calls cost a little more; for test fixtures")
    return p


def run(prog, args, export):
    """Checks the common options and the packages, then runs `export()`; every failure is one line
    on stderr and an exit status: 1 the export failed, 2 bad arguments or an unsupported model, 3
    torch or transformers is missing."""
    if args.max_batch < 2:
        fail(prog, 2, f"--max-batch: expected an integer ≥ 2, got {args.max_batch}")
    # transformers' and torch's warnings about the model (unused weights, deprecations) are noise
    # here: the check against the eager model is what says the export is right.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    missing = missing_packages()
    if missing:
        fail(prog, 3, f"missing Python packages: {', '.join(missing)} "
                      f"(install: {sys.executable} -m pip install {' '.join(missing)})")
    try:
        export()
    except Unsupported as e:
        fail(prog, 2, str(e))
    except Exception as e:  # the one line the CLI shows; the traceback helps nobody there
        first = str(e).strip().split("\n")[0]
        fail(prog, 1, f"export failed: {type(e).__name__}: {first}")


def with_script(source_hash, script):
    """`source_hash` (export_text.source_hash: the folder and the options) with `script`'s own
    bytes: a fixture script skips an export whose hash is unchanged."""
    h = hashlib.sha256(source_hash.encode())
    with open(script, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def read_config(model_dir):
    """config.json of a Hugging Face model folder, else Unsupported."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        raise Unsupported(f"{model_dir}: no config.json (expected a Hugging Face model folder)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@contextlib.contextmanager
def staged_folder(out_dir, replaces):
    """A temporary folder beside `out_dir` to write the export into; when the block ends without an
    error its files move into `out_dir`, replacing `replaces` (what an earlier export left)."""
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        yield tmp
        os.makedirs(out_dir, exist_ok=True)
        for name in replaces:
            if os.path.exists(os.path.join(out_dir, name)):
                os.remove(os.path.join(out_dir, name))
        for name in os.listdir(tmp):
            os.replace(os.path.join(tmp, name), os.path.join(out_dir, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_manifest(folder, manifest):
    with open(os.path.join(folder, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


def compile_pt2(torch, exported, path, fast_compile):
    """AOTInductor: the exported program as a .pt2 at `path`, loaded back to be checked."""
    started = time.monotonic()
    configs = {"aot_inductor.compile_wrapper_opt_level": "O0"} if fast_compile else None
    torch._inductor.aoti_compile_and_package(exported, package_path=path, inductor_configs=configs)
    log(f"AOTInductor: compiled {os.path.basename(path)} in {time.monotonic() - started:.0f} s")
    return torch._inductor.aoti_load_package(path)


def trace(torch, module, example, path):
    """torch.jit.trace fallback: the module traced on `example`, saved at `path`, loaded back."""
    traced = torch.jit.trace(module, example, check_trace=False, strict=False)
    traced.save(path)
    return torch.jit.load(path)


def image_processor_basics(processor):
    """(class name, the F.interpolate mode, the rescale and normalize settings) of an image processor,
    as the export scripts' preprocessing programs apply them."""
    name = type(processor).__name__
    if getattr(processor, "backend", "torchvision") != "torchvision" and not name.endswith("Fast"):
        log(f"note: {name} is PIL-backed; the export reproduces transformers' torchvision backend")
    resample = int(processor.resample) if processor.do_resize else 3
    if resample not in RESAMPLE:
        raise Unsupported(f"{name}: resample {processor.resample} is not bilinear or bicubic")
    mean, std = processor.image_mean, processor.image_std
    as3 = lambda v: [float(x) for x in (v if isinstance(v, (list, tuple)) else [v] * 3)]  # noqa: E731
    normalization = {
        "doRescale": bool(processor.do_rescale),
        "rescaleFactor": float(processor.rescale_factor),
        "doNormalize": bool(processor.do_normalize),
        "imageMean": as3(mean) if mean is not None else None,
        "imageStd": as3(std) if std is not None else None,
    }
    return name, RESAMPLE[resample], normalization


def image_processor_base(torch, s):
    """The base of a scripted image processor (`s`: image_processor_basics' settings): `finish(x)`
    rescales and normalizes the resized uint8 [3, H, W] image as transformers 5's torchvision
    backend does; where it does both, mean and std are scaled by 1 / rescale_factor in float32
    (_fuse_mean_std_and_rescale_factor) and it is one subtract and divide."""
    mean = torch.tensor(s["imageMean"] or [0.0] * 3)
    std = torch.tensor(s["imageStd"] or [1.0] * 3)
    if s["doRescale"] and s["doNormalize"]:
        mean, std = mean * (1.0 / s["rescaleFactor"]), std * (1.0 / s["rescaleFactor"])

    class ImageProcessorBase(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", mean.view(-1, 1, 1))
            self.register_buffer("std", std.view(-1, 1, 1))
            self.do_rescale, self.do_normalize = s["doRescale"], s["doNormalize"]
            self.rescale_factor = s["rescaleFactor"]

        def finish(self, x: torch.Tensor) -> torch.Tensor:
            if self.do_normalize:
                return (x.to(torch.float32) - self.mean) / self.std
            if self.do_rescale:
                return x * self.rescale_factor
            return x.to(torch.float32)

    return ImageProcessorBase
