"""Python side of bench/pipelines.js's depth-estimation and image-segmentation rows.

    python bench/pipelines_dense_child.py prepare OUT
        The checkpoints, once, under OUT (git-ignored models/golden/bench-pipelines), random
        weights (seed 0) at the published checkpoints' dimensions:
          OUT/depth-src      DepthAnythingForDepthEstimation of Depth Anything V2 Small's size (a
                             DINOv2 ViT-S/14 backbone, 12 layers, 384 wide) and its processor
                             (518 px, keep_aspect_ratio, multiple of 14, bicubic)
          OUT/segformer-src  SegformerForSemanticSegmentation of SegFormer-B0's size (ADE20k's 150
                             labels) and its processor (512 × 512)
        and each one in the layout transformers.js reads, OUT/onnx/<name>/{config.json,
        preprocessor_config.json, onnx/model.onnx}, through torch.onnx.export (TorchScript-based,
        height and width dynamic: transformers.js' processor sizes each image itself).
    python bench/pipelines_dense_child.py serve TASK SRC THREADS
        transformers' pipeline(TASK, SRC), one image per call (models/images, decoded on every
        call); the line protocol of bench/pipelines_child.py (one N SEED, many N SEED, quit).
        `many` passes the list with batch_size=64, except for depth: Depth Anything's processor
        sizes each image by its aspect ratio and the pipeline cannot stack those (it raises), so
        batch_size=1 there.
"""
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES = ["chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg", "motorcycle_left.png"]


def depth_model():
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config, DPTImageProcessor

    backbone = Dinov2Config(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, mlp_ratio=4,
                            image_size=518, patch_size=14, out_indices=[9, 10, 11, 12],
                            reshape_hidden_states=False, apply_layernorm=True)
    config = DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=384,
                                 reassemble_factors=[4, 2, 1, 0.5], neck_hidden_sizes=[48, 96, 192, 384],
                                 fusion_hidden_size=64, head_hidden_size=32)
    processor = DPTImageProcessor(size={"height": 518, "width": 518}, keep_aspect_ratio=True, ensure_multiple_of=14,
                                  resample=3, do_pad=False)
    return DepthAnythingForDepthEstimation(config), processor


def segformer_model():
    from transformers import SegformerConfig, SegformerForSemanticSegmentation, SegformerImageProcessor

    labels = {i: f"class {i}" for i in range(150)}
    config = SegformerConfig(hidden_sizes=[32, 64, 160, 256], depths=[2, 2, 2, 2], decoder_hidden_size=256,
                             num_labels=150, id2label=labels, label2id={v: k for k, v in labels.items()})
    return SegformerForSemanticSegmentation(config), SegformerImageProcessor(size={"height": 512, "width": 512})


def onnx_export(model, src, out, output_name):
    import torch

    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    for name in ("config.json", "preprocessor_config.json"):
        shutil.copy(os.path.join(src, name), out)

    class Output(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            return getattr(self.model(pixel_values=pixel_values), output_name)

    tmp = os.path.join(out, "onnx", "model.tmp.onnx")
    example = torch.zeros(1, 3, 518, 700) if output_name == "predicted_depth" else torch.zeros(1, 3, 512, 512)
    torch.onnx.export(Output().eval(), (example,), tmp, input_names=["pixel_values"], output_names=[output_name],
                      dynamic_axes={"pixel_values": {0: "batch", 2: "height", 3: "width"}}, opset_version=17,
                      dynamo=False)
    os.replace(tmp, os.path.join(out, "onnx", "model.onnx"))


def prepare(out):
    import torch

    for name, make, output in (("depth", depth_model, "predicted_depth"), ("segformer", segformer_model, "logits")):
        dest = os.path.join(out, f"{name}-src")
        if not os.path.exists(os.path.join(dest, "model.safetensors")):
            torch.manual_seed(0)
            model, processor = make()
            model.eval().save_pretrained(dest)
            processor.save_pretrained(dest)
        onnx_dir = os.path.join(out, "onnx", name)
        if not os.path.exists(os.path.join(onnx_dir, "onnx", "model.onnx")):
            from transformers import AutoModelForDepthEstimation, AutoModelForSemanticSegmentation

            auto = AutoModelForDepthEstimation if name == "depth" else AutoModelForSemanticSegmentation
            with torch.no_grad():
                onnx_export(auto.from_pretrained(dest).eval(), dest, onnx_dir, output)
        print(f"{name}: {dest}", flush=True)


def serve(task, src, threads):
    import torch
    from transformers import pipeline

    torch.set_num_threads(threads)
    pipe = pipeline(task, model=src, device="cpu")
    images = [os.path.join(HERE, "..", "models", "images", f) for f in IMAGES]
    pipe(images[:2])  # warm-up
    print(json.dumps({"ready": True, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        cmd, *rest = line.split()
        if cmd == "quit":
            break
        n, seed = int(rest[0]), int(rest[1])
        t0 = time.perf_counter()
        if cmd == "one":
            for i in range(n):
                pipe(images[(seed + i) % len(images)])
        else:
            pipe([images[(seed + i) % len(images)] for i in range(n)],
                 batch_size=1 if task == "depth-estimation" else 64)
        print((time.perf_counter() - t0) * 1e3, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    elif sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit("usage: pipelines_dense_child.py prepare OUT | serve TASK SRC THREADS")
