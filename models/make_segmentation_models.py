#!/usr/bin/env python3
"""A random-weight Mask2Former folder, its export and transformers' image-segmentation goldens.

Usage (from the repository root):

    .libtorch/bin/python models/make_segmentation_models.py [--out models/golden/segmentation]

Writes (all generated, under models/golden/, which git ignores):

  segmentation/mask2former-src/  Mask2FormerForUniversalSegmentation (seed 0: a Swin backbone 8 wide,
                                 hidden 32, 10 queries, 5 labels, the class head re-drawn wider so
                                 that scores spread) and its Mask2FormerImageProcessor (64×64)
  segmentation/mask2former/      that folder exported by python/export_dense.py (TorchScript)
  segmentation/goldens.json      per image of IMAGES: the processor's pixel_values and
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


def make_source(folder):
    import torch
    from transformers import (Mask2FormerConfig, Mask2FormerForUniversalSegmentation, Mask2FormerImageProcessor,
                              SwinConfig)

    marker = os.path.join(folder, "make_segmentation_models.json")
    want = {"name": "mask2former", "seed": 0, "v": 2}
    if read_json(marker) == want:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight Mask2Former")
    torch.manual_seed(0)
    # GroupNorm(32, ...) in the pixel decoder: feature sizes of 32; 64×64 images, so that Swin's
    # last stage (stride 32) is 2×2.
    backbone = SwinConfig(image_size=64, patch_size=4, embed_dim=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1],
                          window_size=2, out_features=["stage1", "stage2", "stage3", "stage4"])
    config = Mask2FormerConfig(backbone_config=backbone, feature_size=32, mask_feature_size=32, hidden_dim=32,
                               encoder_layers=1, decoder_layers=2, num_attention_heads=2, dim_feedforward=32,
                               encoder_feedforward_dim=32, num_queries=10, common_stride=4, num_labels=len(LABELS),
                               id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    model = Mask2FormerForUniversalSegmentation(config).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        # transformers' init gives each query near-uniform class scores: nothing would pass a threshold.
        for p in model.class_predictor.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.6)
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    Mask2FormerImageProcessor(size={"height": 64, "width": 64}).save_pretrained(folder)
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
    source, out = os.path.join(args.out, "mask2former-src"), os.path.join(args.out, "mask2former")
    make_source(source)
    options = argparse.Namespace(dtype="float32", format="torchscript", max_batch=64, fast_compile=True)
    want = exporter("export_dense").dense_hash(source, options)
    manifest = export_folder(log, "export_dense", source, out, want,
                             ["--format", "torchscript", "--max-batch", "64", "--fast-compile"])
    path = os.path.join(args.out, "goldens.json")
    stamp = {"exportHashes": {"mask2former": manifest["source"]["hash"]}, "images": IMAGES, "calls": CALLS}
    if up_to_date(log, path, stamp):
        return
    import transformers

    write_json(path, {"source": "transformers pipeline('image-segmentation', model=dir)",
                      "transformers": transformers.__version__, **stamp,
                      "mask2former": {"task": "image-segmentation", "results": goldens(source)}})
    log(f"{os.path.relpath(path, ROOT)}: written")


if __name__ == "__main__":
    main()
