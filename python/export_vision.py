#!/usr/bin/env python3
"""Turns a Hugging Face image-classification, object-detection or vision-backbone checkpoint into a
torch-node folder.

    python export_vision.py MODEL_DIR OUT_DIR [--format auto|pt2|torchscript] [--max-batch 64]
                            [--fast-compile] [--task auto|image-feature-extraction]

Architectures: any `*ForImageClassification` that takes pixel_values alone and answers logits (ViT,
ConvNeXt, DeiT, BEiT, Swin, ... : checked against the eager model at export), task
image-classification; DetrForObjectDetection and YolosForObjectDetection, task object-detection;
a vision backbone (BACKBONES, or any AutoModel checkpoint with --task image-feature-extraction)
whose forward takes pixel_values and answers last_hidden_state [batch, tokens, hidden] (and
pooler_output where the model has a pooler), task image-feature-extraction, as transformers 5's
pipeline('image-feature-extraction') runs AutoModel.
It writes into OUT_DIR, in export_dense.py's layout (format torch-node/dense-model):

  model.pt2 / model.pt  the model: pixel_values float32 [batch, 3, H, W] -> logits [batch, labels]
                        (classification) or [batch, queries, labels + 1 + 4]: the class logits
                        (the last one "no object") and the boxes (cx, cy, w, h in [0, 1]) side by side;
                        (image-feature-extraction) [batch, tokens * hidden + pooled]: last_hidden_state
                        flattened, then pooler_output flattened (pooled 0 where there is none);
  preprocess.pt         the checkpoint's image processor as TorchScript: uint8 RGB [3, h, w] ->
                        pixel_values [3, H, W], the ATen kernels transformers 5's torchvision
                        backend runs: resize to size {height, width}, {shortest_edge} (ConvNeXt's
                        crop_pct included) or {shortest_edge, longest_edge} (DETR; YOLOS: its
                        multiple of 16), center
                        crop, the fused rescale-and-normalize (DETR's and YOLOS's padding pads one
                        image to itself: the pipelines run one image at a time);
  postprocess.pt        (output row, size int64 [2]) -> the row as it is (classification: the
                        pipeline applies softmax/sigmoid and top_k), or post_process_object_detection
                        before its threshold: float32 [queries, 6] of score, label id, xmin, ymin,
                        xmax, ymax in the image's pixels;
  manifest.json         kind 'image-classification' or 'object-detection' (id2label, problemType) or
                        'image-feature-extraction' (hiddenSize, pooledShape: pooler_output's shape
                        per image, or null), the processor.

Exit status: 0 written; 1 the export failed; 2 bad arguments or an unsupported model; 3 torch or
transformers is missing. Every failure is one line on stderr.
"""

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import (Unsupported, image_processor_base, image_processor_basics, log, parser,  # noqa: E402
                           read_config, run, staged_folder, with_script, write_manifest)
from export_dense import compile_program  # noqa: E402
from export_text import source_hash  # noqa: E402

FORMAT_VERSION = 1
PROG = "export_vision.py"
DETECTORS = ("DetrForObjectDetection", "YolosForObjectDetection")
# Backbones whose AutoModel forward takes pixel_values alone and answers last_hidden_state [B, T, H]
# (--task image-feature-extraction takes any other: the export checks the output's shape).
BACKBONES = ("ViTModel", "DeiTModel", "BeitModel", "Data2VecVisionModel", "Dinov2Model",
             "Dinov2WithRegistersModel", "IJepaModel", "ViTMSNModel")
FEATURES = "image-feature-extraction"
FILES = ("model.pt2", "model.pt", "preprocess.pt", "postprocess.pt", "manifest.json")


def vision_hash(model_dir, args):
    """The folder, the options and this script: make_dense_models.py skips an unchanged export."""
    return with_script(source_hash(model_dir, args), __file__)


def task_of(model_dir, task="auto"):
    """(task, architecture) from config.json's architectures (or --task), else Unsupported."""
    config = read_config(model_dir)
    names = config.get("architectures") or []
    if task == FEATURES:
        return FEATURES, names[0] if names else config.get("model_type", "?")
    for name in names:
        if name in DETECTORS:
            return "object-detection", name
        if name.endswith("ForImageClassification"):
            return "image-classification", name
        if name in BACKBONES:
            return FEATURES, name
    raise Unsupported(f"{model_dir}: architectures {names} are not a *ForImageClassification or one of "
                      f"{', '.join(DETECTORS + BACKBONES)} (--task {FEATURES} for another vision backbone)")


def processor_settings(processor):
    """The image processor's resolved settings: the resize rule, the center crop, normalization."""
    name, resample, normalization = image_processor_basics(processor)
    size = {k: int(v) for k, v in dict(processor.size or {}).items() if v is not None}
    keys = set(size)
    if processor.do_resize:
        if keys == {"shortest_edge", "longest_edge"}:
            rule = "yolos" if name.startswith("Yolos") else "shortest-longest"
        elif keys == {"shortest_edge"}:
            rule = "convnext" if name.startswith("ConvNext") else "shortest"
        elif keys == {"height", "width"}:
            rule = "exact"
        else:
            raise Unsupported(f"{name}: size {size} (supported: height and width, shortest_edge, "
                              "shortest_edge and longest_edge)")
    else:
        rule = "none"
    crop = {k: int(v) for k, v in dict(getattr(processor, "crop_size", None) or {}).items() if v is not None}
    do_crop = bool(getattr(processor, "do_center_crop", False))
    if do_crop and set(crop) != {"height", "width"}:
        raise Unsupported(f"{name}: crop_size {crop} (supported: height and width)")
    return {
        "processor": name,
        "doResize": bool(processor.do_resize),
        "resizeRule": rule,
        "size": size,
        "cropPct": float(getattr(processor, "crop_pct", 224 / 256) or 224 / 256),
        "resample": resample,
        "doCenterCrop": do_crop,
        "cropSize": crop if do_crop else None,
        # compile_program's names: a model whose input size follows the image's needs dynamic H, W
        # (a center crop makes every size the crop's: BitImageProcessor, as DINOv2's).
        "keepAspectRatio": rule in ("shortest-longest", "yolos", "shortest") and not do_crop,
        "ensureMultipleOf": 1,
        **normalization,
    }


def Preprocess(torch, s):
    """The torchvision backend's _preprocess (and ConvNeXt's resize) for one uint8 [3, h, w] image, scripted."""
    F = torch.nn.functional

    class ImageProcessor(image_processor_base(torch, s)):
        def __init__(self):
            super().__init__()
            self.rule, self.mode = s["resizeRule"], s["resample"]
            self.height, self.width = int(s["size"].get("height", 0)), int(s["size"].get("width", 0))
            self.shortest, self.longest = int(s["size"].get("shortest_edge", 0)), int(s["size"].get("longest_edge", 0))
            self.crop_pct = s["cropPct"]
            self.do_crop = s["doCenterCrop"]
            crop = s["cropSize"] or {"height": 0, "width": 0}
            self.crop_h, self.crop_w = int(crop["height"]), int(crop["width"])

        def round_half_even(self, x: float) -> int:
            f = math.floor(x)
            d = x - f
            return int(f + 1 if d > 0.5 else (f if d < 0.5 else f + (f % 2)))

        def short_edge(self, h: int, w: int, size: int) -> list[int]:
            """get_resize_output_image_size(size, default_to_square=False), no max_size."""
            short, long = (w, h) if w <= h else (h, w)
            new_long = int(size * long / short)
            return [new_long, size] if w <= h else [size, new_long]

        def aspect(self, h: int, w: int, size: int, max_size: int) -> list[int]:
            """image_transforms.get_size_with_aspect_ratio."""
            raw = -1.0
            lo, hi = float(min(h, w)), float(max(h, w))
            if hi / lo * size > max_size:
                raw = max_size * lo / hi
                size = self.round_half_even(raw)
            if (h <= w and h == size) or (w <= h and w == size):
                return [h, w]
            if w < h:
                return [int(raw * h / w) if raw >= 0 else int(size * h / w), size]
            return [size, int(raw * w / h) if raw >= 0 else int(size * w / h)]

        def aspect_yolos(self, h: int, w: int, size: int, max_size: int) -> list[int]:
            """yolos' get_size_with_aspect_ratio_yolos: its branches in another order, then both
            sides down to a multiple of 16."""
            raw = -1.0
            lo, hi = float(min(h, w)), float(max(h, w))
            if hi / lo * size > max_size:
                raw = max_size * lo / hi
                size = self.round_half_even(raw)
            if w < h:
                oh, ow = (int(raw * h / w) if raw >= 0 else int(size * h / w)), size
            elif (h <= w and h == size) or (w <= h and w == size):
                oh, ow = h, w
            else:
                oh, ow = size, (int(raw * w / h) if raw >= 0 else int(size * w / h))
            return [oh - oh % 16, ow - ow % 16]

        def resize(self, x: torch.Tensor, size: list[int]) -> torch.Tensor:
            if size[0] == x.shape[-2] and size[1] == x.shape[-1]:
                return x
            # torchvision resize_image: uint8 stays uint8 on CPU (the native antialiased kernel).
            return F.interpolate(x, size=size, mode=self.mode, align_corners=False, antialias=True)

        def center_crop(self, x: torch.Tensor, ch: int, cw: int) -> torch.Tensor:
            h, w = x.shape[-2], x.shape[-1]
            if cw > w or ch > h:
                left = (cw - w) // 2 if cw > w else 0
                top = (ch - h) // 2 if ch > h else 0
                right = (cw - w + 1) // 2 if cw > w else 0
                bottom = (ch - h + 1) // 2 if ch > h else 0
                x = F.pad(x, [left, right, top, bottom], value=0.0)
                h, w = x.shape[-2], x.shape[-1]
            top, left = int((h - ch) / 2.0), int((w - cw) / 2.0)
            return x[..., top:top + ch, left:left + cw]

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = image.unsqueeze(0)
            h, w = x.shape[-2], x.shape[-1]
            if self.rule == "exact":
                x = self.resize(x, [self.height, self.width])
            elif self.rule == "shortest":
                x = self.resize(x, self.short_edge(h, w, self.shortest))
            elif self.rule == "shortest-longest":
                x = self.resize(x, self.aspect(h, w, self.shortest, self.longest))
            elif self.rule == "yolos":
                x = self.resize(x, self.aspect_yolos(h, w, self.shortest, self.longest))
            elif self.rule == "convnext":
                if self.shortest < 384:
                    x = self.resize(x, self.short_edge(h, w, int(self.shortest / self.crop_pct)))
                    x = self.center_crop(x, self.shortest, self.shortest)
                else:
                    x = self.resize(x, [self.shortest, self.shortest])
            if self.do_crop:
                x = self.center_crop(x, self.crop_h, self.crop_w)
            return self.finish(x[0])

    return ImageProcessor().eval()


def Postprocess(torch, task):
    """Classification: the logits as they are (image-feature-extraction: the row). Detection:
    post_process_object_detection of one image (softmax, the best class but "no object",
    center_to_corners_format scaled to the image) with every query kept: [queries, 6] of score,
    label, xmin, ymin, xmax, ymax."""

    class Logits(torch.nn.Module):
        def forward(self, logits: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
            return logits

    class Detection(torch.nn.Module):
        def forward(self, row: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
            logits, boxes = row[:, :-4], row[:, -4:]
            scores, labels = torch.nn.functional.softmax(logits, -1)[..., :-1].max(-1)
            cx, cy, w, h = boxes.unbind(-1)
            corners = torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)
            img_h, img_w = size.to(torch.float32).unbind(0)
            scale = torch.stack([img_w, img_h, img_w, img_h], dim=0)
            corners = corners * scale[None, :]
            return torch.cat([scores[:, None], labels[:, None].to(torch.float32), corners], dim=1)

    return (Detection() if task == "object-detection" else Logits()).eval()


OUTPUT_NAMES = {"image-classification": "logits", "object-detection": "logits+pred_boxes",
                FEATURES: "last_hidden_state+pooler_output"}


def feature_shapes(torch, model, x):
    """A backbone's hiddenSize (last_hidden_state [B, T, H]: T follows the image size, H does not) and
    pooledShape (pooler_output's shape per image, null without a pooler); Unsupported for another output."""
    with torch.no_grad():
        out = model(pixel_values=x)
    hidden, pooled = out.get("last_hidden_state"), out.get("pooler_output")
    if hidden is None or hidden.ndim != 3:
        shape = None if hidden is None else list(hidden.shape)
        raise Unsupported(f"{type(model).__name__}: last_hidden_state {shape}, not [batch, tokens, hidden]")
    return {"hiddenSize": int(hidden.shape[-1]),
            "pooledShape": None if pooled is None else [int(d) for d in pooled.shape[1:]]}


def wrapped(torch, model, task):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            out = self.model(pixel_values=pixel_values)
            if task == "image-classification":
                return out.logits.float()
            if task == FEATURES:
                hidden, pooled = out.last_hidden_state, out.get("pooler_output")
                if pooled is None:  # no pooler: ModelOutput drops the key, as the pipeline reads it
                    return hidden.flatten(1).float()
                return torch.cat([hidden.flatten(1), pooled.flatten(1)], dim=1).float()
            return torch.cat([out.logits, out.pred_boxes], dim=-1).float()

    return Model().eval()


def load_model(torch, model_dir, task):
    from transformers import AutoModel, AutoModelForImageClassification, AutoModelForObjectDetection

    auto = {"image-classification": AutoModelForImageClassification, FEATURES: AutoModel}.get(
        task, AutoModelForObjectDetection)
    model = auto.from_pretrained(model_dir, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def export(args, task, architecture):
    import torch
    import transformers
    from transformers import AutoImageProcessor

    started = time.monotonic()
    log(f"loading {args.model_dir} ({architecture})")
    model = load_model(torch, args.model_dir, task)
    processor = AutoImageProcessor.from_pretrained(args.model_dir)
    settings = processor_settings(processor)
    module = wrapped(torch, model, task)
    preprocess = torch.jit.script(Preprocess(torch, settings))
    gen = torch.Generator().manual_seed(0)
    # Example inputs as the processor makes them from images of a few shapes (a size that follows
    # the image's aspect gives each its own): the program is checked on every one.
    shapes = {tuple(preprocess(torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=gen)).shape)
              for h, w in ((300, 451), (500, 333), (64, 64))}
    examples = [torch.randn(b, *shape, generator=gen) for b, shape in zip((2, 1, 3), sorted(shapes))]

    with staged_folder(args.out_dir, FILES) as tmp:
        preprocess.save(os.path.join(tmp, "preprocess.pt"))
        if task == FEATURES:
            feature_shapes(torch, model, examples[0])  # Unsupported before a compile
        torch.jit.script(Postprocess(torch, task)).save(os.path.join(tmp, "postprocess.pt"))
        with torch.no_grad():
            file, fmt, program = compile_program(torch, module, examples, settings, args, tmp)
            diff, scale = 0.0, 0.0
            for x in examples:
                want = module(x)
                diff = max(diff, (program(x) - want).abs().max().item())
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
            "model": {"program": file, "programFormat": fmt,
                      "input": {"name": "pixel_values", "shape": ["batch", 3, "height", "width"]},
                      "output": {"name": OUTPUT_NAMES[task], "ndim": len(out_shape)}},
            "preprocess": "preprocess.pt",
            "postprocess": "postprocess.pt",
            "imageProcessor": settings,
            **(feature_shapes(torch, model, examples[0]) if task == FEATURES else {
                "id2label": {str(k): v for k, v in config.id2label.items()},
                "numLabels": int(config.num_labels),
                "problemType": getattr(config, "problem_type", None)}),
            "maxBatch": args.max_batch if fmt == "pt2" else None,
            "dtype": "float32",
            "source": {"modelType": config.model_type, "architectures": config.architectures,
                       "hash": vision_hash(args.model_dir, args)},
            "exportedWith": {"torch": torch.__version__, "transformers": transformers.__version__},
            "checkedMaxAbsDiff": diff,
        }
        write_manifest(tmp, manifest)
    log(f"wrote {args.out_dir} ({task}, {fmt}) in {time.monotonic() - started:.0f} s")


def main(argv):
    p = parser(PROG, "Export an image classifier, object detector or vision backbone to a torch-node folder.",
               "a Hugging Face *ForImageClassification, DETR, YOLOS or vision backbone folder", max_batch=64)
    p.add_argument("--task", choices=("auto", FEATURES), default="auto",
                   help=f"auto: from config.json's architectures; {FEATURES}: the AutoModel's last_hidden_state "
                        "and pooler_output, whatever the architectures")
    args = p.parse_args(argv)
    args.dtype = "float32"  # source_hash's options
    run(PROG, args, lambda: export(args, *task_of(args.model_dir, args.task)))


if __name__ == "__main__":
    main(sys.argv[1:])
