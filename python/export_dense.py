#!/usr/bin/env python3
"""Turns a Hugging Face depth-estimation or semantic-segmentation checkpoint into a torch-node folder.

    python export_dense.py MODEL_DIR OUT_DIR [--format auto|pt2|torchscript] [--max-batch 64]
                           [--fast-compile]

Architectures: DPTForDepthEstimation and DepthAnythingForDepthEstimation (task depth-estimation),
SegformerForSemanticSegmentation and DPTForSemanticSegmentation (task image-segmentation, semantic),
Mask2FormerForUniversalSegmentation and DetrForSegmentation (task image-segmentation: panoptic,
instance and semantic; a fixed processor size {height, width}). It
writes into OUT_DIR:

  model.pt2 / model.pt  the model: pixel_values float32 [batch, 3, H, W] -> predicted_depth
                        [batch, h, w] (depth) or logits [batch, labels, h, w] (segmentation), or
                        (Mask2Former, DETR) the class logits and mask logits side by side:
                        [batch, queries, labels + 1 + h * w];
  preprocess.pt         the checkpoint's image processor as TorchScript: uint8 RGB [3, h, w] ->
                        pixel_values [3, H, W], the ATen kernels transformers 5's torchvision
                        backend runs (antialiased resize of uint8, DPT's keep_aspect_ratio and
                        ensure_multiple_of, the fused rescale-and-normalize);
  postprocess.pt        the image processor's post-processing of one image as TorchScript:
                        (output [h, w] or [labels, h, w], size int64 [2]) -> the depth resized
                        bicubic to the image's size (post_process_depth_estimation), or the
                        argmax of the logits resized bilinear (post_process_semantic_segmentation);
                        Mask2Former, DETR: the output row flattened, then the image's height and width
                        (the options come after it, in segments.pt);
  segments.pt           Mask2Former and DETR only: (that row, subtask, threshold, mask_threshold,
                        overlap_mask_area_threshold) -> (segment ids int32 [H, W], segments float64
                        [n, 3]: id, label id, score), Mask2FormerImageProcessor's (DetrImageProcessor's)
                        post_process_panoptic_segmentation / post_process_instance_segmentation /
                        post_process_semantic_segmentation (then the segments are empty and the
                        ids are label ids) as TorchScript;
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
    "Mask2FormerForUniversalSegmentation": "image-segmentation",
    "DetrForSegmentation": "image-segmentation",
}
# Models with class and mask queries (panoptic, instance and semantic), post-processed by segments.pt.
UNIVERSAL = ("Mask2FormerForUniversalSegmentation", "DetrForSegmentation")
# The thresholds each subtask's post-processing reads (DETR's instance is its panoptic without fusing;
# Mask2Former's ranks the class scores and reads only `threshold`); the pipeline refuses the others.
READS = {
    "Mask2FormerForUniversalSegmentation": {"panoptic": ["threshold", "maskThreshold", "overlapMaskAreaThreshold"],
                                            "instance": ["threshold"], "semantic": []},
    "DetrForSegmentation": {"panoptic": ["threshold", "maskThreshold", "overlapMaskAreaThreshold"],
                            "instance": ["threshold", "maskThreshold", "overlapMaskAreaThreshold"], "semantic": []},
}
FILES = ("model.pt2", "model.pt", "preprocess.pt", "postprocess.pt", "segments.pt", "manifest.json")


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
    """The image processor's resolved settings (DPTImageProcessor, SegformerImageProcessor,
    Mask2FormerImageProcessor: a fixed height and width, rounded up to a multiple of size_divisor)."""
    name, resample, normalization = image_processor_basics(processor)
    size = {k: v for k, v in dict(processor.size or {}).items() if v is not None}
    if processor.do_resize and {"height", "width"} != set(size):
        raise Unsupported(f"{name}: size {size} (supported: height and width)")
    # DETR pads each image to the largest of its batch: one image (the pipeline's), the identity.
    padding = getattr(processor, "do_pad", False) and not (name.startswith("Detr") and "height" in size)
    if getattr(processor, "do_center_crop", False) or padding:
        raise Unsupported(f"{name}: do_center_crop / do_pad are not supported")
    return {
        "processor": name,
        "doResize": bool(processor.do_resize),
        "size": size,
        "resample": resample,
        "keepAspectRatio": bool(getattr(processor, "keep_aspect_ratio", False)),
        "ensureMultipleOf": int(getattr(processor, "ensure_multiple_of", 1) or 1),
        # DPT's size_divisor pads (do_pad, refused above); Mask2Former's rounds the resize up.
        "sizeDivisor": int(processor.size_divisor or 0) if name.startswith("Mask2Former") else 0,
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
            self.divisor = s["sizeDivisor"]

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
                if self.divisor > 0:
                    # Mask2FormerImageProcessor.resize: up to a multiple of size_divisor (one image: no padding).
                    nh = int(math.ceil(nh / self.divisor) * self.divisor)
                    nw = int(math.ceil(nw / self.divisor) * self.divisor)
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

    class Packed(torch.nn.Module):
        def forward(self, row: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
            return torch.cat([row.flatten(), size.to(torch.float32)])

    if task == "universal":
        return Packed().eval()
    return (Depth() if task == "depth-estimation" else Segmentation()).eval()


def Segments(torch, queries, labels, mask_height, mask_width, family):
    """Mask2FormerImageProcessor's (family "mask2former") or DetrImageProcessor's ("detr") post-processing
    of one image, scripted: the same ATen calls in the same order (Mask2Former's 384×384 upsampling,
    topk(sorted=False), the bilinear and nearest resizes), so ids and scores are transformers'.
    `labels` excludes the null class."""
    from typing import List, Tuple

    F = torch.nn.functional

    class Segments(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.queries, self.labels = queries, labels
            self.mask_height, self.mask_width = mask_height, mask_width
            self.mask2former = family == "mask2former"

        def forward(self, packed: torch.Tensor, subtask: str, threshold: float, mask_threshold: float,
                    overlap_mask_area_threshold: float) -> Tuple[torch.Tensor, torch.Tensor]:
            width = self.labels + 1 + self.mask_height * self.mask_width
            n = self.queries * width
            row = packed[:n].view(1, self.queries, width)
            target = [int(packed[n]), int(packed[n + 1])]
            class_queries_logits = row[:, :, : self.labels + 1]
            masks = row[:, :, self.labels + 1:].reshape(1, self.queries, self.mask_height, self.mask_width)
            if self.mask2former:
                # "Scale back to preprocessed image size - (384, 384) for all models"
                masks = F.interpolate(masks, size=[384, 384], mode="bilinear", align_corners=False)
            if subtask == "semantic":
                return self.semantic(class_queries_logits, masks, target)
            if subtask == "instance" and self.mask2former:
                return self.instance(class_queries_logits[0], masks[0], target, threshold)
            return self.panoptic(class_queries_logits, masks, target, threshold, mask_threshold,
                                 overlap_mask_area_threshold)

        def semantic(self, class_queries_logits: torch.Tensor, masks: torch.Tensor,
                     target: List[int]) -> Tuple[torch.Tensor, torch.Tensor]:
            masks_classes = class_queries_logits.softmax(dim=-1)[..., :-1]
            segmentation = torch.einsum("bqc, bqhw -> bchw", masks_classes, masks.sigmoid())
            resized = F.interpolate(segmentation[0].unsqueeze(dim=0), size=target, mode="bilinear",
                                    align_corners=False)
            return resized[0].argmax(dim=0).to(torch.int32), torch.zeros(0, 3, dtype=torch.float64)

        def instance(self, mask_cls: torch.Tensor, mask_pred: torch.Tensor, target: List[int],
                     threshold: float) -> Tuple[torch.Tensor, torch.Tensor]:
            scores = F.softmax(mask_cls, dim=-1)[:, :-1]
            labels = torch.arange(self.labels).unsqueeze(0).repeat(self.queries, 1).flatten(0, 1)
            scores_per_image, topk_indices = scores.flatten(0, 1).topk(self.queries, sorted=False)
            labels_per_image = labels[topk_indices]
            topk_indices = torch.div(topk_indices, self.labels, rounding_mode="floor")
            mask_pred = mask_pred[topk_indices]
            pred_masks = (mask_pred > 0).float()
            mask_scores = (mask_pred.sigmoid().flatten(1) * pred_masks.flatten(1)).sum(1) / (
                pred_masks.flatten(1).sum(1) + 1e-6)
            pred_scores = scores_per_image * mask_scores
            segmentation = torch.zeros(target) - 1
            pred_masks = F.interpolate(pred_masks.unsqueeze(0), size=target, mode="nearest")[0]
            segments: List[List[float]] = []
            current = 0
            for j in range(self.queries):
                score = float(pred_scores[j].item())
                if not bool(torch.all(pred_masks[j] == 0)) and score >= threshold:
                    segmentation[pred_masks[j] == 1] = float(current)
                    segments.append([float(current), float(labels_per_image[j].item()), score])
                    current += 1
            return segmentation.to(torch.int32), self.table(segments)

        def panoptic(self, class_queries_logits: torch.Tensor, masks: torch.Tensor, target: List[int],
                     threshold: float, mask_threshold: float,
                     overlap_mask_area_threshold: float) -> Tuple[torch.Tensor, torch.Tensor]:
            mask_probs = masks.sigmoid()[0]
            pred_scores, pred_labels = F.softmax(class_queries_logits, dim=-1).max(-1)
            pred_scores, pred_labels = pred_scores[0], pred_labels[0]
            # remove_low_and_no_objects
            keep = pred_labels.ne(self.labels) & (pred_scores > threshold)
            mask_probs, pred_scores, pred_labels = mask_probs[keep], pred_scores[keep], pred_labels[keep]
            if mask_probs.shape[0] <= 0:
                return torch.full(target, -1, dtype=torch.int32), self.table([])
            # compute_segments, label_ids_to_fuse empty (as the pipeline leaves it)
            segmentation = torch.zeros(target, dtype=torch.int32)
            mask_probs = F.interpolate(mask_probs.unsqueeze(0), size=target, mode="bilinear", align_corners=False)[0]
            mask_probs *= pred_scores.view(-1, 1, 1)
            mask_labels = mask_probs.argmax(0)
            segments: List[List[float]] = []
            current = 0
            for k in range(pred_labels.shape[0]):
                # check_segment_validity
                mask_k = mask_labels == k
                mask_k_area = mask_k.sum()
                original_area = (mask_probs[k] >= mask_threshold).sum()
                exists = bool(mask_k_area > 0) and bool(original_area > 0)
                if exists:
                    area_ratio = mask_k_area / original_area
                    if not float(area_ratio.item()) > overlap_mask_area_threshold:
                        exists = False
                if exists:
                    current += 1
                    segmentation[mask_k] = current
                    segments.append([float(current), float(pred_labels[k].item()), float(pred_scores[k].item())])
            return segmentation, self.table(segments)

        def table(self, segments: List[List[float]]) -> torch.Tensor:
            if len(segments) == 0:
                return torch.zeros(0, 3, dtype=torch.float64)
            return torch.tensor(segments, dtype=torch.float64)

    return Segments().eval()


def queries_of(out):
    """(class logits [batch, queries, labels + 1], mask logits [batch, queries, h, w]) of Mask2Former's
    or DETR's output."""
    if hasattr(out, "class_queries_logits"):
        return out.class_queries_logits, out.masks_queries_logits
    return out.logits, out.pred_masks


def wrapped(torch, model, task):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            out = self.model(pixel_values=pixel_values)
            if task == "universal":
                # One tensor for the Batcher: the class logits, then each query's mask logits.
                class_logits, masks = queries_of(out)
                return torch.cat([class_logits, masks.flatten(2)], dim=-1).float()
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
    from transformers import (AutoImageProcessor, AutoModelForDepthEstimation, AutoModelForSemanticSegmentation,
                              AutoModelForUniversalSegmentation, DetrForSegmentation)

    started = time.monotonic()
    log(f"loading {args.model_dir} ({architecture})")
    # "universal": class and mask queries, post-processed per subtask by segments.pt
    head = "universal" if architecture in UNIVERSAL else task
    auto = {"depth-estimation": AutoModelForDepthEstimation, "universal": AutoModelForUniversalSegmentation}.get(
        head, AutoModelForSemanticSegmentation)
    if architecture == "DetrForSegmentation":
        auto = DetrForSegmentation
    model = auto.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    processor = AutoImageProcessor.from_pretrained(args.model_dir)
    settings = processor_settings(processor)
    module = wrapped(torch, model, head)
    preprocess = torch.jit.script(Preprocess(torch, settings))
    gen = torch.Generator().manual_seed(0)
    # Example inputs as the processor makes them from images of a few shapes (a keep_aspect_ratio
    # processor gives each its own size): the program is checked on every one.
    shapes = {tuple(preprocess(torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=gen)).shape)
              for h, w in ((300, 451), (500, 333), (64, 64))}
    examples = [torch.randn(b, *shape, generator=gen) for b, shape in zip((2, 1, 3), sorted(shapes))]

    with staged_folder(args.out_dir, FILES) as tmp:
        preprocess.save(os.path.join(tmp, "preprocess.pt"))
        torch.jit.script(Postprocess(torch, head)).save(os.path.join(tmp, "postprocess.pt"))
        universal = None
        if head == "universal":
            with torch.no_grad():
                out = model(pixel_values=examples[0][:1])
            class_logits, mask_logits = queries_of(out)
            queries, mask_height, mask_width = mask_logits.shape[1:]
            family = "detr" if architecture == "DetrForSegmentation" else "mask2former"
            universal = {"family": family, "queries": int(queries), "labels": int(class_logits.shape[-1] - 1),
                         "maskHeight": int(mask_height), "maskWidth": int(mask_width), "reads": READS[architecture]}
            segments = Segments(torch, universal["queries"], universal["labels"], universal["maskHeight"],
                                universal["maskWidth"], family)
            torch.jit.script(segments).save(os.path.join(tmp, "segments.pt"))
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
            # depth: predicted_depth [batch, h, w]; segmentation: logits [batch, labels, h, w];
            # universal: [batch, queries, labels + 1 + h * w] (class logits, then the mask logits)
            "model": {"program": file, "programFormat": fmt,
                      "input": {"name": "pixel_values", "shape": ["batch", 3, "height", "width"]},
                      "output": {"name": {"depth-estimation": "predicted_depth", "universal": "queries"}.get(head, "logits"),
                                 "ndim": len(out_shape)}},
            "preprocess": "preprocess.pt",
            "postprocess": "postprocess.pt",
            "imageProcessor": settings,
            "id2label": {str(k): v for k, v in config.id2label.items()} if task == "image-segmentation" else None,
            "subtask": ("panoptic" if universal else "semantic") if task == "image-segmentation" else None,
            # the first is the pipeline's default (panoptic, then instance, then semantic)
            "subtasks": (["panoptic", "instance", "semantic"] if universal else ["semantic"])
            if task == "image-segmentation" else None,
            "segments": "segments.pt" if universal else None,
            "universal": universal,
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
                  "a Hugging Face DPT, Depth Anything, Segformer, Mask2Former or DETR segmentation folder", max_batch=64).parse_args(argv)
    args.dtype = "float32"  # source_hash's options
    run(PROG, args, lambda: export(args, *task_of(args.model_dir)))


if __name__ == "__main__":
    main(sys.argv[1:])
