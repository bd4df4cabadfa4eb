#!/usr/bin/env python3
"""Random-weight Mask2Former and DETR segmentation folders, their exports and transformers' image-segmentation goldens.

Usage (from the repository root):

    .libtorch/bin/python models/make_segmentation_models.py [--out models/golden/segmentation]

Writes (all generated, under models/golden/, which git ignores):

  segmentation/mask2former-src/  Mask2FormerForUniversalSegmentation (seed 0: a Swin backbone 8 wide,
                                 hidden 32, 10 queries, 5 labels, the class head re-drawn wider so
                                 that scores spread) and its Mask2FormerImageProcessor (64×64)
  segmentation/detr-src/         DetrForSegmentation (seed 0: a ResNet backbone, d_model 64, 10 queries,
                                 5 labels, its class head re-drawn wider) and its DetrImageProcessor
                                 (64×64)
  segmentation/<name>/           that folder exported by python/export_dense.py (TorchScript)
  segmentation/goldens.json      per model and image of IMAGES: the processor's pixel_values and
                                 pipeline('image-segmentation')'s answer to each of CALLS
                                 (label, score, mask uint8 base64); astronaut.png gives three
                                 panoptic segments, two with the thresholds moved

Idempotent: the source is rewritten only when its recipe changes, the export only when its source
or python/export_dense.py changed, the goldens only when the export or the inputs changed.
"""

import argparse
import base64
import os
import shutil

from fixture_common import HERE, ROOT, exporter, logger, missing, read_json, up_to_date, write_json
from fixture_common import export as export_folder

PROG = "make_segmentation_models.py"
log = logger(PROG)
IMAGES = ["chelsea.png", "coffee.png", "astronaut.png"]
LABELS = {0: "background", 1: "cat", 2: "cup", 3: "table", 4: "sky"}
MODELS = ("mask2former", "detr")
# The pipeline's keyword arguments per call (camelCase in the goldens): its defaults (panoptic,
# threshold 0.9), each subtask, and the thresholds moved.
CALLS = [
    {},
    {"threshold": 0.0},
    {"subtask": "panoptic", "threshold": 0.3, "mask_threshold": 0.3, "overlap_mask_area_threshold": 0.2},
    {"subtask": "instance", "threshold": 0.1},
    {"subtask": "instance"},
    {"subtask": "semantic"},
]
CAMEL = {"subtask": "subtask", "threshold": "threshold", "mask_threshold": "maskThreshold",
         "overlap_mask_area_threshold": "overlapMaskAreaThreshold"}


def recipe(name):
    """(model, image processor) of a random-weight model: tiny, seeded."""
    import torch
    from transformers import (DetrConfig, DetrForSegmentation, DetrImageProcessor, Mask2FormerConfig,
                              Mask2FormerForUniversalSegmentation, Mask2FormerImageProcessor, ResNetConfig, SwinConfig)

    torch.manual_seed(0)
    labels = dict(num_labels=len(LABELS), id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    if name == "detr":
        # the mask head's GroupNorms divide d_model down to d_model / 64 channels
        backbone = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1],
                                out_features=["stage1", "stage2", "stage3", "stage4"])
        config = DetrConfig(use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
                            d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=8,
                            decoder_attention_heads=8, encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=10,
                            **labels)
        return DetrForSegmentation(config).eval(), DetrImageProcessor(size={"height": 64, "width": 64})
    # GroupNorm(32, ...) in the pixel decoder: feature sizes of 32; 64×64 images, so that Swin's
    # last stage (stride 32) is 2×2.
    backbone = SwinConfig(image_size=64, patch_size=4, embed_dim=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1],
                          window_size=2, out_features=["stage1", "stage2", "stage3", "stage4"])
    config = Mask2FormerConfig(backbone_config=backbone, feature_size=32, mask_feature_size=32, hidden_dim=32,
                               encoder_layers=1, decoder_layers=2, num_attention_heads=2, dim_feedforward=32,
                               encoder_feedforward_dim=32, num_queries=10, common_stride=4, **labels)
    return Mask2FormerForUniversalSegmentation(config).eval(), Mask2FormerImageProcessor(size={"height": 64, "width": 64})


def make_source(folder, name):
    import torch

    marker = os.path.join(folder, "make_segmentation_models.json")
    want = {"name": name, "seed": 0, "v": 3 if name == "detr" else 2}
    if read_json(marker) == want:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight {name}")
    model, processor = recipe(name)
    head = model.class_predictor if name == "mask2former" else model.detr.class_labels_classifier
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        # transformers' init gives each query near-uniform class scores: nothing would pass a threshold.
        for p in head.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * (0.6 if name == "mask2former" else 2.0))
        if name == "detr":
            # and near-equal masks, so that which query wins a pixel is a rounding tie: queries wider
            for p in (model.detr.model.query_position_embeddings.weight, model.bbox_attention.q_proj.weight,
                      model.bbox_attention.k_proj.weight):
                p.copy_(torch.randn(p.shape, generator=gen) * 3.0)
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    write_json(marker, want)


def b64(array):
    return base64.b64encode(array.tobytes()).decode("ascii")


def goldens(source):
    import numpy as np
    from PIL import Image
    from transformers import AutoImageProcessor, pipeline

    run = pipeline("image-segmentation", model=source, device="cpu")
    processor = AutoImageProcessor.from_pretrained(source)
    entries = []
    for name in IMAGES:
        path = os.path.join(HERE, "images", name)
        pixels = processor(images=Image.open(path).convert("RGB"), return_tensors="pt")["pixel_values"]
        calls = []
        for kwargs in CALLS:
            segments = [{"score": r["score"], "label": r["label"], "mask": b64(np.asarray(r["mask"], dtype=np.uint8))}
                        for r in run(path, **kwargs)]
            calls.append({"options": {CAMEL[k]: v for k, v in kwargs.items()}, "segments": segments})
        entries.append({"image": name, "pixelShape": list(pixels.shape), "pixelValues": b64(pixels.numpy()),
                        "calls": calls})
    return entries


def main():
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--out", default=os.path.join(HERE, "golden", "segmentation"))
    args = parser.parse_args()
    lacking = missing(("torch", "transformers", "PIL"))
    if lacking:
        log(f"skipped: missing Python packages {', '.join(lacking)}")
        return
    os.makedirs(args.out, exist_ok=True)
    options = argparse.Namespace(dtype="float32", format="torchscript", max_batch=64, fast_compile=True)
    hashes = {}
    for name in MODELS:
        source, out = os.path.join(args.out, f"{name}-src"), os.path.join(args.out, name)
        make_source(source, name)
        want = exporter("export_dense").dense_hash(source, options)
        manifest = export_folder(log, "export_dense", source, out, want,
                                 ["--format", "torchscript", "--max-batch", "64", "--fast-compile"])
        hashes[name] = manifest["source"]["hash"]
    path = os.path.join(args.out, "goldens.json")
    stamp = {"exportHashes": hashes, "images": IMAGES, "calls": CALLS}
    if up_to_date(log, path, stamp):
        return
    import transformers

    write_json(path, {"source": "transformers pipeline('image-segmentation', model=dir)",
                      "transformers": transformers.__version__, **stamp,
                      **{name: {"task": "image-segmentation", "results": goldens(os.path.join(args.out, f"{name}-src"))}
                         for name in MODELS}})
    log(f"{os.path.relpath(path, ROOT)}: written")


if __name__ == "__main__":
    main()
