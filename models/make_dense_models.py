#!/usr/bin/env python3
"""Random-weight depth and segmentation folders, their exports and transformers goldens.

Usage (from the repository root):

    .libtorch/bin/python models/make_dense_models.py [--out models/golden/dense]

Writes (all generated, under models/golden/, which git ignores), each model seeded (0), 16–32 wide,
1–2 layers, small images:

  dense/<name>-src/   DPTForDepthEstimation (dpt: 32×32 bicubic), DepthAnythingForDepthEstimation
                      (depth-anything: a DINOv2 backbone, 28×28 keep_aspect_ratio, multiple of 14)
                      and SegformerForSemanticSegmentation (segformer: 32×32 bilinear, 5 labels)
                      and DPTForSemanticSegmentation (dpt-segmentation: 32×32 bicubic, 5 labels),
                      with their image processors; ViTForImageClassification (vit: 32×32) and
                      ConvNextForImageClassification (convnext: shortest_edge 32, crop_pct),
                      DetrForObjectDetection (detr: a ResNet backbone) and YolosForObjectDetection
                      (yolos), both shortest_edge 32 / longest_edge 48, 10 queries, 5 labels
                      ViTModel (vit-backbone: 32×32, a pooler), Dinov2Model (dinov2: BitImageProcessor,
                      shortest_edge 32 bicubic, center crop 28, position embeddings for 56: interpolated)
                      and IJepaModel (ijepa: 32×32, no pooler)
  dense/<name>/       that folder exported by python/export_dense.py (the classifiers, detectors and
                      backbones: python/export_vision.py)
  dense/rgba.png, dense/chelsea-jpg-pil.png
                      an RGBA PNG, and chelsea.jpg as PIL decodes it (write_rgba)
  dense/goldens.json  per model and image of IMAGES (results) and of DENSE_EXTRA_IMAGES
                      (extraResults): pipeline('depth-estimation') (predicted_depth float32 and
                      depth uint8, base64) or pipeline('image-segmentation') (label and mask uint8,
                      base64), and the processor's pixel_values; per classifier and detector and
                      image of VISION_IMAGES: the pipeline's answer to each of VISION_CALLS
  dense/backbone-goldens.json
                      per backbone and image of VISION_IMAGES: pipeline('image-feature-extraction')'s
                      tensors without and with pool=True (float32, base64; pooled null where the
                      pipeline raises: no pooler), and the pixel_values

Idempotent: a source is rewritten only when its recipe changes, an export only when its source or
its export script changed, the goldens only when an export or an input list changed.
"""

import argparse
import base64
import os
import shutil

from fixture_common import HERE, ROOT, exporter, logger, missing, read_json, up_to_date, write_json
from fixture_common import export as export_folder

PROG = "make_dense_models.py"
log = logger(PROG)
IMAGES = ["chelsea.png", "coffee.png", "astronaut.png"]
# A trace takes seconds where an AOTInductor compile takes a minute; Depth Anything's input size
# follows the image's aspect (a trace would keep the example's), so it is a .pt2 with dynamic H, W.
MODELS = {"dpt": "torchscript", "depth-anything": "pt2", "segformer": "torchscript", "dpt-segmentation": "torchscript",
          "vit": "torchscript", "convnext": "torchscript", "detr": "torchscript", "yolos": "torchscript"}
# The image classifiers and detectors go through python/export_vision.py, the rest export_dense.py.
# The backbones (python/export_vision.py too): their goldens go to backbone-goldens.json.
BACKBONES = {"vit-backbone": "torchscript", "dinov2": "torchscript", "ijepa": "torchscript"}
VISION = ("vit", "convnext", "detr", "yolos", *BACKBONES)
LABELS = {0: "background", 1: "cat", 2: "cup", 3: "table", 4: "sky"}


def recipe(name):
    """(model, image processor) of a random-weight model: tiny, seeded."""
    import torch
    from transformers import (DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config, DPTConfig,
                              DPTForDepthEstimation, DPTForSemanticSegmentation, DPTImageProcessor, SegformerConfig,
                              SegformerForSemanticSegmentation, SegformerImageProcessor)

    torch.manual_seed(0)
    if name == "dpt":
        config = DPTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8, backbone_out_indices=[0, 1], reassemble_factors=[4, 2],
                           neck_hidden_sizes=[16, 16], fusion_hidden_size=16, head_in_index=-1)
        return DPTForDepthEstimation(config), DPTImageProcessor(size={"height": 32, "width": 32})
    if name == "depth-anything":
        backbone = Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
                                image_size=28, patch_size=14, out_indices=[1, 2], reshape_hidden_states=False,
                                apply_layernorm=True)
        config = DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=32, reassemble_factors=[4, 2],
                                     neck_hidden_sizes=[16, 16], fusion_hidden_size=16,
                                     head_hidden_size=16)
        processor = DPTImageProcessor(size={"height": 28, "width": 28}, keep_aspect_ratio=True,
                                      ensure_multiple_of=14, resample=3)
        return DepthAnythingForDepthEstimation(config), processor
    labels = dict(num_labels=len(LABELS), id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    if name in BACKBONES:
        return backbone_recipe(name)
    if name in VISION:
        return vision_recipe(name, labels)
    if name == "dpt-segmentation":
        config = DPTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8, backbone_out_indices=[0, 1], reassemble_factors=[4, 2],
                           neck_hidden_sizes=[16, 16], fusion_hidden_size=16, head_in_index=-1,
                           use_auxiliary_head=False, **labels)
        return DPTForSemanticSegmentation(config), DPTImageProcessor(size={"height": 32, "width": 32})
    config = SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                             patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                             decoder_hidden_size=32, **labels)
    return SegformerForSemanticSegmentation(config), SegformerImageProcessor(size={"height": 32, "width": 32})


def vision_recipe(name, labels):
    """An image classifier (ViT: 32×32 bilinear; ConvNeXt: shortest_edge 32 and crop_pct) or a detector
    (DETR with a ResNet backbone, YOLOS: shortest_edge 32, longest_edge 48, 10 queries)."""
    from transformers import (ConvNextConfig, ConvNextForImageClassification, ConvNextImageProcessor, DetrConfig,
                              DetrForObjectDetection, DetrImageProcessor, ResNetConfig, ViTConfig,
                              ViTForImageClassification, ViTImageProcessor, YolosConfig, YolosForObjectDetection,
                              YolosImageProcessor)

    if name == "vit":
        config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8, **labels)
        return ViTForImageClassification(config), ViTImageProcessor(size={"height": 32, "width": 32})
    if name == "convnext":
        config = ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, **labels)
        return ConvNextForImageClassification(config), ConvNextImageProcessor(size={"shortest_edge": 32})
    size = {"shortest_edge": 32, "longest_edge": 48}
    if name == "detr":
        backbone = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], out_features=["stage2"])
        config = DetrConfig(use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
                            d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=10,
                            **labels)
        return DetrForObjectDetection(config), DetrImageProcessor(size=size)
    config = YolosConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                         image_size=[32, 48], patch_size=8, num_detection_tokens=10, **labels)
    return YolosForObjectDetection(config), YolosImageProcessor(size=size)


def backbone_recipe(name):
    """A ViTModel (ViTImageProcessor 32×32 bilinear, mean and std 0.5, as google/vit-base-patch16-224-in21k;
    with its pooler), an IJepaModel (the same processor; no pooler) or a Dinov2Model (BitImageProcessor as
    facebook/dinov2-base's: shortest_edge, bicubic, center crop, ImageNet mean and std; image_size 56 against
    a 28 crop, so that the position embeddings are interpolated as 518 against 224 are)."""
    from transformers import (BitImageProcessor, Dinov2Config, Dinov2Model, IJepaConfig, IJepaModel, ViTConfig,
                              ViTImageProcessor, ViTModel)

    tiny = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32,
                patch_size=8)
    if name == "vit-backbone":
        config = ViTConfig(**tiny, architectures=["ViTModel"])
        return ViTModel(config), ViTImageProcessor(size={"height": 32, "width": 32})
    if name == "ijepa":
        config = IJepaConfig(**tiny, architectures=["IJepaModel"])
        return IJepaModel(config), ViTImageProcessor(size={"height": 32, "width": 32})
    config = Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2, image_size=56,
                          patch_size=14, architectures=["Dinov2Model"])
    imagenet = dict(image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225])
    processor = BitImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 28, "width": 28}, resample=3,
                                  do_center_crop=True, **imagenet)
    return Dinov2Model(config), processor


def spread_depth(model, processor):
    """Scales the depth head's last convolution so that depths are about 1 (random weights give
    1e-8, where a relative tolerance means nothing)."""
    import torch

    last = [m for m in model.head.modules() if isinstance(m, torch.nn.Conv2d)][-1]
    size = processor.size
    with torch.no_grad():
        top = model(pixel_values=torch.randn(1, 3, size["height"], size["width"])).predicted_depth.abs().max()
        last.weight.mul_(1 / top)
        last.bias.mul_(1 / top)


def spread_detection(model):
    """Re-draws the detection heads (and the queries: DETR's and its cross-attention projections, YOLOS' tokens) wider:
    at transformers' init every query gives the same box and near-uniform class scores, where
    comparing boxes and the threshold would test little."""
    import torch

    gen = torch.Generator().manual_seed(1)
    heads = ("class_labels_classifier", "bbox_predictor")
    queries = ("model.query_position_embeddings", "model.decoder.layers.0.encoder_attn.q_proj",
               "model.decoder.layers.0.encoder_attn.k_proj", "vit.embeddings.detection_tokens")
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.startswith(heads):
                p.copy_(torch.randn(p.shape, generator=gen) * (0.5 if p.ndim > 1 else 0.1))
            elif n.startswith(queries):
                p.copy_(torch.randn(p.shape, generator=gen) * 3.0)


def make_source(folder, name):
    marker = os.path.join(folder, "make_dense_models.json")
    want = {"name": name, "seed": 0, "v": 5 if name in ("detr", "yolos") else 3}
    if read_json(marker) == want:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight {name} model")
    model, processor = recipe(name)
    if name in ("dpt", "depth-anything"):
        spread_depth(model, processor)
    if name in ("detr", "yolos"):
        spread_detection(model)
    shutil.rmtree(folder, ignore_errors=True)
    model.eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    write_json(marker, want)


def export(name, source, out, fmt):
    args = argparse.Namespace(dtype="float32", format=fmt, max_batch=64, fast_compile=True)
    script = "export_vision" if name in VISION else "export_dense"
    module = exporter(script)
    want = (module.vision_hash if name in VISION else module.dense_hash)(source, args)
    return export_folder(log, script, source, out, want, ["--format", fmt, "--max-batch", "64", "--fast-compile"])


def export_backbone(source, out, fmt):
    """A backbone through python/export_vision.py's export() in this process, as fixture_common.export
    would run it (skipped where the manifest records the hash): three fewer torch imports of CI's time."""
    module = exporter("export_vision")
    args = argparse.Namespace(model_dir=source, out_dir=out, dtype="float32", format=fmt, max_batch=64,
                              fast_compile=True, task="auto")
    manifest = read_json(os.path.join(out, "manifest.json"))
    if (manifest and manifest.get("source", {}).get("hash") == module.vision_hash(source, args)
            and os.path.exists(os.path.join(out, manifest["model"]["program"]))):
        log(f"{os.path.relpath(out, ROOT)}: up to date")
        return manifest
    log(f"{os.path.relpath(out, ROOT)}: exporting {os.path.relpath(source, ROOT)}")
    module.export(args, *module.task_of(source))
    return read_json(os.path.join(out, "manifest.json"))


def b64(array):
    return base64.b64encode(array.tobytes()).decode("ascii")


# The classifiers and detectors also read a JPEG and an RGBA PNG (written here: coffee.png with an
# alpha ramp), which transformers converts to RGB, dropping the alpha (write_rgba).
VISION_IMAGES = ["chelsea.png", "coffee.png", "chelsea.jpg", "rgba.png"]
# Per call of the classifiers and detectors: the pipeline's keyword arguments (camelCase in the goldens).
VISION_CALLS = {
    "image-classification": [{}, {"top_k": 2, "function_to_apply": "sigmoid"},
                             {"top_k": 9, "function_to_apply": "none"}],
    "object-detection": [{}, {"threshold": 0.0}, {"threshold": 0.9}],
}


def image_path(out, name):
    """The images write_rgba makes lie in `out`; the rest are models/images'."""
    generated = name in ("rgba.png", "chelsea-jpg-pil.png")
    return os.path.join(out, name) if generated else os.path.join(HERE, "images", name)


def write_rgba(out):
    """out/rgba.png: coffee.png (cropped to 64×48) with alpha from 0 at the left to 255 at the right;
    out/chelsea-jpg-pil.png: chelsea.jpg as PIL decodes it."""
    import numpy as np
    from PIL import Image

    # chelsea.jpg as PIL (libjpeg) decodes it, losslessly: JPEG decoders may differ by a step.
    decoded = image_path(out, "chelsea-jpg-pil.png")
    if not os.path.exists(decoded):
        Image.open(image_path(out, "chelsea.jpg")).convert("RGB").save(decoded)
    path = image_path(out, "rgba.png")
    if os.path.exists(path):
        return
    rgb = np.asarray(Image.open(image_path(out, "coffee.png")).convert("RGB"))[100:148, 200:264]
    alpha = np.tile(np.linspace(0, 255, rgb.shape[1]).astype(np.uint8), (rgb.shape[0], 1))
    Image.fromarray(np.dstack([rgb, alpha]), "RGBA").save(path)


def vision_goldens(source, task, out):
    """Per image: the processor's pixel_values and pipeline(task)'s answer to each of VISION_CALLS."""
    from PIL import Image
    from transformers import AutoImageProcessor, pipeline

    run = pipeline(task, model=source, device="cpu")
    processor = AutoImageProcessor.from_pretrained(source)
    camel = {"top_k": "topK", "function_to_apply": "functionToApply", "threshold": "threshold"}
    entries = []
    for name in VISION_IMAGES:
        path = image_path(out, name)
        pixels = processor(images=Image.open(path).convert("RGB"), return_tensors="pt")["pixel_values"]
        calls = [{"options": {camel[k]: v for k, v in kwargs.items()}, "result": run(path, **kwargs)}
                 for kwargs in VISION_CALLS[task]]
        entries.append({"image": name, "pixelShape": list(pixels.shape), "pixelValues": b64(pixels.numpy()),
                        "calls": calls})
    return entries


# The depth and segmentation models also read these (write_rgba): an RGBA PNG, and a JPEG as PIL decodes it.
DENSE_EXTRA_IMAGES = ["rgba.png", "chelsea-jpg-pil.png"]


def goldens(source, task, images=None, out=None):
    import numpy as np
    from PIL import Image
    from transformers import AutoImageProcessor, pipeline

    run = pipeline(task, model=source, device="cpu")
    processor = AutoImageProcessor.from_pretrained(source)
    entries = []
    for name in images or IMAGES:
        path = image_path(out, name) if out else os.path.join(HERE, "images", name)
        pixels = processor(images=Image.open(path).convert("RGB"), return_tensors="pt")["pixel_values"]
        entry = {"image": name, "pixelShape": list(pixels.shape), "pixelValues": b64(pixels.numpy())}
        result = run(path)
        if task == "depth-estimation":
            depth = result["predicted_depth"].numpy().astype(np.float32)
            entry.update(predictedDepthShape=list(depth.shape), predictedDepth=b64(depth),
                         depth=b64(np.asarray(result["depth"], dtype=np.uint8)))
        else:
            entry["segments"] = [{"score": r["score"], "label": r["label"],
                                  "mask": b64(np.asarray(r["mask"], dtype=np.uint8))} for r in result]
        entries.append(entry)
    return entries


def backbone_goldens(source, out):
    """Per image of VISION_IMAGES: pipeline('image-feature-extraction') without and with pool=True
    (return_tensors=True: float32 [1, T, H] and [1, H]), and the processor's pixel_values."""
    import numpy as np
    from PIL import Image
    from transformers import AutoImageProcessor, pipeline

    run = pipeline("image-feature-extraction", model=source, device="cpu")
    processor = AutoImageProcessor.from_pretrained(source)
    entries = []
    for name in VISION_IMAGES:
        path = image_path(out, name)
        pixels = processor(images=Image.open(path).convert("RGB"), return_tensors="pt")["pixel_values"]
        entry = {"image": name, "pixelShape": list(pixels.shape), "pixelValues": b64(pixels.numpy())}
        for key, kwargs in (("hidden", {}), ("pooled", {"pool": True})):
            try:
                t = run(path, return_tensors=True, **kwargs).numpy().astype(np.float32)
            except ValueError:  # pool without a pooler
                entry[key] = None
                continue
            entry[key] = {"shape": list(t.shape), "data": b64(t)}
        entries.append(entry)
    return entries


def write_backbone_goldens(out, hashes):
    path = os.path.join(out, "backbone-goldens.json")
    want = {name: hashes[name] for name in BACKBONES}
    if up_to_date(log, path, {"exportHashes": want, "visionImages": VISION_IMAGES}):
        return
    import transformers

    write_json(path, {
        "source": "transformers pipeline('image-feature-extraction', model=dir)"
                  "(image, return_tensors=True[, pool=True])",
        "transformers": transformers.__version__,
        "exportHashes": want,
        "visionImages": VISION_IMAGES,
        **{name: backbone_goldens(os.path.join(out, f"{name}-src"), out) for name in BACKBONES},
    })
    log(f"{os.path.relpath(path, ROOT)}: written")


def main():
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--out", default=os.path.join(HERE, "golden", "dense"))
    args = parser.parse_args()
    lacking = missing(("torch", "transformers", "PIL"))
    if lacking:
        log(f"skipped: missing Python packages {', '.join(lacking)}")
        return
    os.makedirs(args.out, exist_ok=True)
    hashes, tasks = {}, {}
    for name, fmt in {**MODELS, **BACKBONES}.items():
        source = os.path.join(args.out, f"{name}-src")
        make_source(source, name)
        out = os.path.join(args.out, name)
        manifest = export_backbone(source, out, fmt) if name in BACKBONES else export(name, source, out, fmt)
        hashes[name], tasks[name] = manifest["source"]["hash"], manifest["kind"]
    write_rgba(args.out)
    write_backbone_goldens(args.out, hashes)
    hashes = {name: h for name, h in hashes.items() if name in MODELS}
    path = os.path.join(args.out, "goldens.json")
    if up_to_date(log, path, {"exportHashes": hashes, "images": IMAGES, "visionImages": VISION_IMAGES,
                              "visionCalls": VISION_CALLS, "denseExtraImages": DENSE_EXTRA_IMAGES}):
        return
    import transformers

    write_json(path, {
        "source": "transformers pipeline('depth-estimation' | 'image-segmentation', model=dir)",
        "transformers": transformers.__version__,
        "exportHashes": hashes,
        "images": IMAGES,
        "visionImages": VISION_IMAGES,
        "visionCalls": VISION_CALLS,
        "denseExtraImages": DENSE_EXTRA_IMAGES,
        **{name: {"task": tasks[name], "results": goldens(os.path.join(args.out, f"{name}-src"), tasks[name]),
                  "extraResults": goldens(os.path.join(args.out, f"{name}-src"), tasks[name], DENSE_EXTRA_IMAGES,
                                          args.out)}
           for name in MODELS if name not in VISION},
        **{name: {"task": tasks[name], "results": vision_goldens(os.path.join(args.out, f"{name}-src"), tasks[name],
                                                                args.out)}
           for name in VISION if name in MODELS},
    })
    log(f"{os.path.relpath(path, ROOT)}: written")


if __name__ == "__main__":
    main()
