#!/usr/bin/env python3
"""Turns a Hugging Face depth-estimation or semantic-segmentation checkpoint into a torch-node folder.

    python export_dense.py MODEL_DIR OUT_DIR [--format auto|pt2|torchscript] [--max-batch 64]
                           [--fast-compile]

Architectures: DPTForDepthEstimation and DepthAnythingForDepthEstimation (task depth-estimation),
SegformerForSemanticSegmentation and DPTForSemanticSegmentation (task image-segmentation, semantic). It writes into OUT_DIR:

  model.pt2 / model.pt  the model: pixel_values float32 [batch, 3, H, W] -> predicted_depth
                        [batch, h, w] (depth) or logits [batch, labels, h, w] (segmentation);
  preprocess.pt         the checkpoint's image processor as TorchScript: uint8 RGB [3, h, w] ->
                        pixel_values [3, H, W], the ATen kernels transformers 5's torchvision
                        backend runs (antialiased resize of uint8, DPT's keep_aspect_ratio and
                        ensure_multiple_of, the fused rescale-and-normalize);
  postprocess.pt        the image processor's post-processing of one image as TorchScript:
                        (output [h, w] or [labels, h, w], size int64 [2]) -> the depth resized
                        bicubic to the image's size (post_process_depth_estimation), or the
                        argmax of the logits resized bilinear (post_process_semantic_segmentation);
  manifest.json         kind 'depth-estimation' or 'image-segmentation', id2label, the processor.

Exit status: 0 written; 1 the export failed; 2 bad arguments or an unsupported model; 3 torch or
transformers is missing. Every failure is one line on stderr.
"""

import os
import sys
import time
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import (Unsupported, compile_pt2, image_processor_base, image_processor_basics, log, parser, read_config,  # noqa: E402
                           run, staged_folder, trace, with_script, write_manifest)
from export_text import source_hash  # noqa: E402

FORMAT_VERSION = 1
PROG = "export_dense.py"
ARCHITECTURES = {
    "DPTForDepthEstimation": "depth-estimation",
    "DepthAnythingForDepthEstimation": "depth-estimation",
    "SegformerForSemanticSegmentation": "image-segmentation",
    "DPTForSemanticSegmentation": "image-segmentation",
}
FILES = ("model.pt2", "model.pt", "preprocess.pt", "postprocess.pt", "manifest.json")


def dense_hash(model_dir, args):
    """The folder, the options and this script: make_dense_models.py skips an unchanged export."""
    return with_script(source_hash(model_dir, args), __file__)


def task_of(model_dir):
    """(task, architecture) from config.json's architectures, else Unsupported."""
    config = read_config(model_dir)
    for name in config.get("architectures") or []:
        if name in ARCHITECTURES:
            return ARCHITECTURES[name], name
    raise Unsupported(f"{model_dir}: architectures {config.get('architectures')} are not one of "
                      f"{', '.join(ARCHITECTURES)}")


def processor_settings(processor):
    """The image processor's resolved settings (DPTImageProcessor, SegformerImageProcessor)."""
    name, resample, normalization = image_processor_basics(processor)
    size = {k: v for k, v in dict(processor.size or {}).items() if v is not None}
    if processor.do_resize and {"height", "width"} != set(size):
        raise Unsupported(f"{name}: size {size} (supported: height and width)")
    if getattr(processor, "do_center_crop", False) or getattr(processor, "do_pad", False):
        raise Unsupported(f"{name}: do_center_crop / do_pad are not supported")
    return {
        "processor": name,
        "doResize": bool(processor.do_resize),
        "size": size,
        "resample": resample,
        "keepAspectRatio": bool(getattr(processor, "keep_aspect_ratio", False)),
        "ensureMultipleOf": int(getattr(processor, "ensure_multiple_of", 1) or 1),
        **normalization,
    }


def Preprocess(torch, s):
    """DPTImageProcessor / SegformerImageProcessor._preprocess for one uint8 [3, h, w] image, scripted."""
    import math

    F = torch.nn.functional

    class ImageProcessor(image_processor_base(torch, s)):
        def __init__(self):
            super().__init__()
            self.height, self.width = int(s["size"].get("height", 0)), int(s["size"].get("width", 0))
            self.keep_aspect_ratio, self.multiple = s["keepAspectRatio"], s["ensureMultipleOf"]
            self.do_resize = s["doResize"]
            self.mode = s["resample"]

        def constrain(self, val: float) -> int:
            """dpt's constrain_to_multiple_of (no max_val; min_val 0): Python's round(), half to even."""
            q = val / self.multiple
            f = math.floor(q)
            d = q - f
            r = f + 1 if d > 0.5 else (f if d < 0.5 else f + (f % 2))
            x = r * self.multiple
            if x < 0:
                x = math.ceil(q) * self.multiple
            return int(x)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = image.unsqueeze(0)
            h, w = x.shape[-2], x.shape[-1]
            if self.do_resize:
                # dpt's get_resize_output_image_size (Segformer's processor: multiple 1, no aspect).
                scale_h, scale_w = self.height / h, self.width / w
                if self.keep_aspect_ratio:
                    if abs(1 - scale_w) < abs(1 - scale_h):
                        scale_h = scale_w
                    else:
                        scale_w = scale_h
                nh, nw = self.constrain(scale_h * h), self.constrain(scale_w * w)
                if nh != h or nw != w:
                    # torchvision resize_image: uint8 stays uint8 on CPU (the native antialiased kernel).
                    x = F.interpolate(x, size=[nh, nw], mode=self.mode, align_corners=False, antialias=True)
            return self.finish(x[0])

    return ImageProcessor().eval()


def Postprocess(torch, task):
    """post_process_depth_estimation / post_process_semantic_segmentation of one image, scripted."""
    F = torch.nn.functional

    class Depth(torch.nn.Module):
        def forward(self, depth: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
            target = [int(size[0]), int(size[1])]
            return F.interpolate(depth.unsqueeze(0).unsqueeze(1), size=target, mode="bicubic",
                                 align_corners=False)[0, 0]

    class Segmentation(torch.nn.Module):
        def forward(self, logits: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
            target = [int(size[0]), int(size[1])]
            resized = F.interpolate(logits.unsqueeze(0), size=target, mode="bilinear", align_corners=False)
            return resized[0].argmax(0)

    return (Depth() if task == "depth-estimation" else Segmentation()).eval()


def wrapped(torch, model, task):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            out = self.model(pixel_values=pixel_values)
            return (out.predicted_depth if task == "depth-estimation" else out.logits).float()

    return Model().eval()


def compile_program(torch, module, examples, s, args, out):
    """model.pt2 (torch.export + AOTInductor, batch and (with keep_aspect_ratio) H and W dynamic) or
    model.pt (a trace); either checked against the eager model on every example shape."""
    from torch.export import Dim

    first = examples[0]
    if args.format in ("auto", "pt2"):
        try:
            dims = {0: Dim("batch", min=1, max=args.max_batch)}
            if s["keepAspectRatio"]:
                m = s["ensureMultipleOf"]
                # min 2: a single patch row or column takes another branch of the model's reshapes.
                dims[2] = m * Dim("rows", min=2, max=8192 // m)
                dims[3] = m * Dim("columns", min=2, max=8192 // m)
            # Height and width dynamic: strict (dynamo), as non-strict export bakes DepthAnything's
            # int(patch_height * patch_size) into the program; is_tracing() True, so that DINOv2's
            # interpolate_pos_encoding always interpolates (a same-size bicubic resize is the
            # identity) instead of branching on the example's patch count, a guard on the shape.
            # A fixed size: non-strict (dynamo refuses a context manager in DPT's forward).
            strict = s["keepAspectRatio"]
            with mock.patch("torch.jit.is_tracing", (lambda: True) if strict else torch.jit.is_tracing):
                exported = torch.export.export(module, (first,), dynamic_shapes=(dims,), strict=strict)
            log("AOTInductor: compiling the model")
            return "model.pt2", "pt2", compile_pt2(torch, exported, os.path.join(out, "model.pt2"), args.fast_compile)
        except Exception as e:  # noqa: BLE001 - reported, then the fallback
            if args.format == "pt2":
                raise
            log(f"torch.export failed ({type(e).__name__}: {str(e).splitlines()[0][:200]}); falling back to TorchScript")
    log("torch.jit.trace: the model")
    return "model.pt", "torchscript", trace(torch, module, (first,), os.path.join(out, "model.pt"))


def export(args, task, architecture):
    import torch
    import transformers
    from transformers import AutoImageProcessor, AutoModelForDepthEstimation, AutoModelForSemanticSegmentation

    started = time.monotonic()
    log(f"loading {args.model_dir} ({architecture})")
    auto = AutoModelForDepthEstimation if task == "depth-estimation" else AutoModelForSemanticSegmentation
    model = auto.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    processor = AutoImageProcessor.from_pretrained(args.model_dir)
    settings = processor_settings(processor)
    module = wrapped(torch, model, task)
    preprocess = torch.jit.script(Preprocess(torch, settings))
    gen = torch.Generator().manual_seed(0)
    # Example inputs as the processor makes them from images of a few shapes (a keep_aspect_ratio
    # processor gives each its own size): the program is checked on every one.
    shapes = {tuple(preprocess(torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=gen)).shape)
              for h, w in ((300, 451), (500, 333), (64, 64))}
    examples = [torch.randn(b, *shape, generator=gen) for b, shape in zip((2, 1, 3), sorted(shapes))]

    with staged_folder(args.out_dir, FILES) as tmp:
        preprocess.save(os.path.join(tmp, "preprocess.pt"))
        torch.jit.script(Postprocess(torch, task)).save(os.path.join(tmp, "postprocess.pt"))
        with torch.no_grad():
            file, fmt, run = compile_program(torch, module, examples, settings, args, tmp)
            diff, scale = 0.0, 0.0
            for x in examples:
                want = module(x)
                diff = max(diff, (run(x) - want).abs().max().item())
                scale = max(scale, want.abs().max().item())
            out_shape = list(module(examples[0]).shape)
        if not diff <= 1e-4 * max(1.0, scale):
            raise RuntimeError(f"the exported model differs from the eager model by {diff:.3g}")
        log(f"checked against the eager model on {len(examples)} shapes: max abs diff {diff:.3g}")
        config = model.config
        manifest = {
            "format": "torch-node/dense-model",
            "formatVersion": FORMAT_VERSION,
            "kind": task,
            # depth: predicted_depth [batch, h, w]; segmentation: logits [batch, labels, h, w]
            "model": {"program": file, "programFormat": fmt,
                      "input": {"name": "pixel_values", "shape": ["batch", 3, "height", "width"]},
                      "output": {"name": "predicted_depth" if task == "depth-estimation" else "logits",
                                 "ndim": len(out_shape)}},
            "preprocess": "preprocess.pt",
            "postprocess": "postprocess.pt",
            "imageProcessor": settings,
            "id2label": {str(k): v for k, v in config.id2label.items()} if task == "image-segmentation" else None,
            "subtask": "semantic" if task == "image-segmentation" else None,
            "maxBatch": args.max_batch if fmt == "pt2" else None,
            "dtype": "float32",
            "source": {"modelType": config.model_type, "architectures": config.architectures,
                       "hash": dense_hash(args.model_dir, args)},
            "exportedWith": {"torch": torch.__version__, "transformers": transformers.__version__},
            "checkedMaxAbsDiff": diff,
        }
        write_manifest(tmp, manifest)
    log(f"wrote {args.out_dir} ({task}, {fmt}) in {time.monotonic() - started:.0f} s")


def main(argv):
    args = parser(PROG, "Export a depth or segmentation model to a torch-node folder.",
                  "a Hugging Face DPT, Depth Anything or Segformer folder", max_batch=64).parse_args(argv)
    args.dtype = "float32"  # source_hash's options
    run(PROG, args, lambda: export(args, *task_of(args.model_dir)))


if __name__ == "__main__":
    main(sys.argv[1:])
