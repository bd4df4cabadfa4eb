#!/usr/bin/env python3
"""Turns a Hugging Face OwlViTForObjectDetection or Owlv2ForObjectDetection checkpoint into a
torch-node model folder, for torch.pipeline('zero-shot-object-detection').

    python export_owl.py MODEL_DIR OUT_DIR [--format auto|pt2|torchscript] [--max-batch 64]
                         [--fast-compile]

Run with your own Python, torch and transformers (`npx torch-node export` runs it for a folder
whose config.json's architectures name one of them). It writes into OUT_DIR:

  text.pt2 / text.pt    the query embedder: input_ids, attention_mask int64 [batch, seq],
                        right-padded -> text_embeds float32 [batch, dim], L2-normalized, as
                        OwlViTModel.forward hands them to the class head;
  image.pt2 / image.pt  image_embedder, then the class head's image side and the box head:
                        pixel_values float32 [batch, 3, S, S] -> [batch, patches, dim + 6]: the
                        class embeddings divided by (norm + 1e-6), logit_shift, elu(logit_scale) + 1,
                        and pred_boxes (sigmoid, center x, center y, width, height in [0, 1]);
  head.pt               TorchScript: one image's [patches, dim + 6], the queries [labels, dim] and
                        the image's (height, width) -> (scores [labels, patches], boxes [patches, 4]):
                        OwlViTClassPredictionHead's logits through a sigmoid, and
                        post_process_object_detection's corners in the image's pixels (OWL-ViT:
                        x by width, y by height; OWLv2, whose processor pads to a square: both by
                        the longer side);
  preprocess.pt         the image processor as TorchScript: uint8 RGB [3, h, w] -> pixel_values
                        [3, S, S]. OWL-ViT: transformers 5's torchvision backend (antialiased
                        bicubic resize of uint8, optional center crop, fused rescale-normalize, as
                        export_clip.py); OWLv2: rescale, pad bottom/right to a square with 0, the
                        Gaussian blur its resize applies (sigma (factor - 1) / 2), bilinear resize
                        without antialias, normalize;
  tokenizer.json        (+ tokenizer_config.json, special_tokens_map.json);
  manifest.json         kind 'owl': the family, dim, patches, the processor settings, the
                        tokenizer's limits.

Exit status: 0 written; 1 the export failed; 2 bad arguments or an unsupported model; 3 torch or
transformers is missing. Every failure is one line on stderr.
"""

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_clip import Preprocess as ClipPreprocess  # noqa: E402
from export_clip import compile_program, processor_settings  # noqa: E402
from export_common import (Unsupported, image_processor_basics, log, parser, read_config, run,  # noqa: E402
                           staged_folder, with_script, write_manifest)
from export_text import TOKENIZER_FILES, copy_tokenizer, source_hash  # noqa: E402

FORMAT_VERSION = 1
PROG = "export_owl.py"
ARCHITECTURES = {"OwlViTForObjectDetection": "owlvit", "Owlv2ForObjectDetection": "owlv2"}


def owl_hash(model_dir, args):
    """The folder, the options and this script (with export_clip.py's, whose processor it reuses)."""
    return with_script(with_script(source_hash(model_dir, args), __file__),
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "export_clip.py"))


def family_of(model_dir):
    """'owlvit' or 'owlv2' from config.json's architectures, else Unsupported."""
    config = read_config(model_dir)
    for name in config.get("architectures") or []:
        if name in ARCHITECTURES:
            return ARCHITECTURES[name]
    raise Unsupported(f"{model_dir}: architectures {config.get('architectures')} are not "
                      "OwlViTForObjectDetection or Owlv2ForObjectDetection")


def owlv2_settings(processor):
    """Owlv2ImageProcessor's settings, as its _preprocess applies them."""
    name, _, normalization = image_processor_basics(processor)
    size = {k: v for k, v in dict(processor.size).items() if v is not None}
    if {"height", "width"} != set(size):
        raise Unsupported(f"{name}: size {size} (supported: height and width)")
    if not processor.do_resize:
        raise Unsupported(f"{name}: do_resize false (the model takes {size} only)")
    return {"processor": name, "doResize": True, "size": size, "resample": "bilinear",
            "doPad": bool(processor.do_pad), **normalization}


def Owlv2Preprocess(torch, s):
    """Owlv2ImageProcessor._preprocess (torchvision backend) for one uint8 [3, h, w] image, scripted:
    its Gaussian blur is torchvision's gaussian_blur_image with the kernel sizes and sigmas as
    Owlv2ImageProcessor.resize computes them (float32 tensors)."""
    F = torch.nn.functional
    height, width = int(s["size"]["height"]), int(s["size"]["width"])
    mean = torch.tensor(s["imageMean"] or [0.0] * 3).view(-1, 1, 1)
    std = torch.tensor(s["imageStd"] or [1.0] * 3).view(-1, 1, 1)

    class ImageProcessor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.height, self.width = height, width
            self.register_buffer("mean", mean)
            self.register_buffer("std", std)
            self.do_rescale, self.do_normalize, self.do_pad = s["doRescale"], s["doNormalize"], s["doPad"]
            self.rescale_factor = s["rescaleFactor"]

        def kernel1d(self, size: torch.Tensor, sigma: float) -> torch.Tensor:
            # torchvision _get_gaussian_kernel1d, `size` a 0-d int32 tensor as Owlv2 passes it, so
            # lim is float32 as there
            lim = (size - 1) / (2.0 * math.sqrt(2.0))
            x = torch.linspace(-lim.item(), lim.item(), steps=int(size.item()), dtype=torch.float32)
            return torch.softmax(x.div(sigma).pow(2).neg(), dim=0)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = image.unsqueeze(0)
            x = x * self.rescale_factor if self.do_rescale else x.to(torch.float32)
            if self.do_pad:
                h, w = x.shape[-2], x.shape[-1]
                side = max(h, w)
                x = F.pad(x, [0, side - w, 0, side - h], value=0.0)
            h, w = x.shape[-2], x.shape[-1]
            factors = torch.tensor([h, w]) / torch.tensor([self.height, self.width])
            sigma = ((factors - 1) / 2).clamp(min=0)
            if not bool(torch.any(sigma == 0)):
                sizes = 2 * torch.ceil(3 * sigma).to(torch.int32) + 1
                kx = self.kernel1d(sizes[0], float(sigma[0].item()))
                ky = self.kernel1d(sizes[1], float(sigma[1].item()))
                kernel = (ky.unsqueeze(-1) * kx).expand(3, 1, ky.shape[0], kx.shape[0])
                px, py = int(sizes[0].item()) // 2, int(sizes[1].item()) // 2
                x = F.conv2d(F.pad(x, [px, px, py, py], mode="reflect"), kernel, groups=3)
            if h != self.height or w != self.width:
                x = F.interpolate(x, size=[self.height, self.width], mode="bilinear", align_corners=False,
                                  antialias=False)
            x = x[0]
            if self.do_normalize:
                x = (x - self.mean) / self.std
            return x

    return ImageProcessor().eval()


def Head(torch, family):
    """OwlViTClassPredictionHead's logits for each query (sigmoid: post_process_object_detection's
    scores) and the boxes as corners in the image's pixels (its _scale_boxes)."""

    class ClassAndBoxes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.square = family == "owlv2"

        def forward(self, image: torch.Tensor, queries: torch.Tensor, size: torch.Tensor):
            dim = image.shape[-1] - 6
            embeds = image[:, :dim]
            shift, scale = image[:, dim:dim + 1], image[:, dim + 1:dim + 2]
            queries = queries / (torch.linalg.norm(queries, dim=-1, keepdim=True) + 1e-6)
            logits = torch.einsum("...pd,...qd->...pq", embeds, queries)
            scores = torch.sigmoid((logits + shift) * scale).t().contiguous()
            cx, cy, w, h = image[:, dim + 2], image[:, dim + 3], image[:, dim + 4], image[:, dim + 5]
            corners = torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)
            size = size.to(torch.int32)
            height, width = size[0], size[1]
            if self.square:
                height = torch.max(height, width)
                width = height
            return scores, corners * torch.stack([width, height, width, height]).unsqueeze(0)

    return ClassAndBoxes().eval()


def towers(torch, model, family):
    base = model.owlvit if family == "owlvit" else model.owlv2

    class Text(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            embeds = base.get_text_features(input_ids=input_ids, attention_mask=attention_mask).pooler_output
            # OwlViTModel.forward's text_embeds, which the detection forward takes as its queries
            return embeds / torch.linalg.norm(embeds, ord=2, dim=-1, keepdim=True)

    class Image(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            feature_map = model.image_embedder(pixel_values=pixel_values)[0]
            b, h, w, d = feature_map.shape
            feats = torch.reshape(feature_map, (b, h * w, d))
            head = model.class_head
            embeds = head.dense0(feats)
            embeds = embeds / (torch.linalg.norm(embeds, dim=-1, keepdim=True) + 1e-6)
            shift = head.logit_shift(feats)
            scale = head.elu(head.logit_scale(feats)) + 1
            boxes = model.box_predictor(feats, feature_map)
            return torch.cat([embeds, shift, scale, boxes], dim=-1).float()

    return Text().eval(), Image().eval()


def eager_detection(torch, model, ids, pixels, size, family):
    """transformers' own forward + post-processing of one image and one query: the check's reference."""
    out = model(input_ids=ids, pixel_values=pixels, attention_mask=torch.ones_like(ids))
    scores = torch.sigmoid(out.logits[0, :, 0])
    cx, cy, w, h = out.pred_boxes[0].unbind(-1)
    corners = torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)
    hh, ww = size
    if family == "owlv2":
        hh = ww = max(hh, ww)
    return scores, corners * torch.tensor([ww, hh, ww, hh], dtype=torch.float32)


def export(args, family):
    import torch
    import transformers
    from torch.export import Dim
    from transformers import AutoImageProcessor, AutoModelForZeroShotObjectDetection, AutoTokenizer

    started = time.monotonic()
    log(f"loading {args.model_dir} ({family})")
    model = AutoModelForZeroShotObjectDetection.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    processor = AutoImageProcessor.from_pretrained(args.model_dir)
    settings = processor_settings(processor) if family == "owlvit" else owlv2_settings(processor)
    text_config, vision_config = model.config.text_config, model.config.vision_config
    max_positions = int(text_config.max_position_embeddings)
    image_size = int(vision_config.image_size)
    patches = (image_size // int(vision_config.patch_size)) ** 2
    dim = int(text_config.hidden_size)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    text, image = towers(torch, model, family)

    gen = torch.Generator().manual_seed(0)
    seq = min(8, max_positions)
    vocab = max(6, text_config.vocab_size)
    text_example = (torch.randint(5, vocab, (2, seq), generator=gen), torch.ones(2, seq, dtype=torch.int64))
    pixels = torch.randn(2, 3, image_size, image_size, generator=gen)
    batch = Dim("batch", min=1, max=args.max_batch)
    sequence = Dim("sequence", min=1, max=max_positions)

    files = ("text.pt2", "text.pt", "image.pt2", "image.pt", "head.pt", "preprocess.pt", "manifest.json",
             *TOKENIZER_FILES)
    with staged_folder(args.out_dir, files) as tmp:
        log("torch.jit.script: the image processor and the head")
        scripted = ClipPreprocess(torch, settings) if family == "owlvit" else Owlv2Preprocess(torch, settings)
        torch.jit.script(scripted).save(os.path.join(tmp, "preprocess.pt"))
        torch.jit.script(Head(torch, family)).save(os.path.join(tmp, "head.pt"))
        head = torch.jit.load(os.path.join(tmp, "head.pt"))
        preprocess = torch.jit.load(os.path.join(tmp, "preprocess.pt"))
        pixel_diff = 0.0
        for h, w in ((image_size + 13, image_size * 2 + 3), (image_size // 2 + 1, image_size // 3 + 2)):
            picture = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=gen)
            want = processor(images=[picture], return_tensors="pt")["pixel_values"][0]
            pixel_diff = max(pixel_diff, (preprocess(picture) - want).abs().max().item())
        if not pixel_diff <= 1e-5:
            raise RuntimeError(f"preprocess.pt differs from {settings['processor']} by {pixel_diff:.3g} (> 1e-5)")
        log(f"preprocess.pt checked against {settings['processor']}: max abs diff {pixel_diff:.3g}")
        with torch.no_grad():
            text_file, text_format, text_run = compile_program(
                torch, text, text_example, ({0: batch, 1: sequence}, {0: batch, 1: sequence}), "text", args, tmp)
            image_file, image_format, image_run = compile_program(
                torch, image, (pixels,), ({0: batch},), "image", args, tmp)
            # The programs and the head against transformers' own forward, one query at a time as
            # the pipeline runs it; lengths and batches other than the examples'.
            diff = 0.0
            for b, s in ((3, min(5, max_positions)), (1, max_positions)):
                ids = torch.randint(5, vocab, (b, s), generator=gen)
                queries = text_run(ids, torch.ones_like(ids))
                px = torch.randn(b, 3, image_size, image_size, generator=gen)
                rows = image_run(px)
                for i in range(b):
                    size = (17 + 5 * i, 29 - 3 * i)
                    scores, boxes = head(rows[i], queries, torch.tensor(size))
                    want_scores, want_boxes = eager_detection(torch, model, ids[i:i + 1], px[i:i + 1], size, family)
                    diff = max(diff, (scores[i] - want_scores).abs().max().item(),
                               ((boxes - want_boxes).abs().max() / max(size)).item())
        if not diff <= 1e-4:
            raise RuntimeError(f"the exported programs differ from the eager model by {diff:.3g} (> 1e-4)")
        log(f"checked against the eager model: max abs diff {diff:.3g} (scores, boxes / image side)")

        copy_tokenizer(args.model_dir, tokenizer, tmp)
        manifest = {
            "format": "torch-node/owl-model",
            "formatVersion": FORMAT_VERSION,
            "kind": "owl",
            "family": family,  # owlvit: boxes scale by width and height; owlv2: by the longer side
            "text": {"program": text_file, "programFormat": text_format, "inputs": ["input_ids", "attention_mask"]},
            "image": {"program": image_file, "programFormat": image_format,
                      "input": {"name": "pixel_values", "shape": ["batch", 3, image_size, image_size]},
                      "output": {"shape": ["batch", patches, dim + 6],
                                 "columns": "class embeds (dim), logit shift, logit scale, cx, cy, w, h"}},
            "head": "head.pt",
            "preprocess": "preprocess.pt",
            "imageProcessor": settings,
            "dim": dim,
            "patches": patches,
            "padTokenId": pad_id,
            # transformers' pipeline tokenizes each label alone, neither padded nor cut: a label
            # longer than the positions fails there, and is refused here.
            "maxSequenceLength": max_positions,
            "imageSize": image_size,
            "maxBatch": args.max_batch if "pt2" in (text_format, image_format) else None,
            "tokenizer": "tokenizer.json",
            "dtype": "float32",
            "source": {"modelType": model.config.model_type, "architectures": model.config.architectures,
                       "hash": owl_hash(args.model_dir, args)},
            "exportedWith": {"torch": torch.__version__, "transformers": transformers.__version__},
            "checkedMaxAbsDiff": diff,
            "checkedPixelMaxAbsDiff": pixel_diff,
        }
        write_manifest(tmp, manifest)
    log(f"wrote {args.out_dir} ({family}, {text_format}/{image_format}, {patches} patches, {dim}-dim) "
        f"in {time.monotonic() - started:.0f} s")


def main(argv):
    args = parser(PROG, "Export an OWL-ViT or OWLv2 detector to a torch-node folder.",
                  "a Hugging Face OwlViTForObjectDetection or Owlv2ForObjectDetection folder",
                  max_batch=64).parse_args(argv)
    args.dtype = "float32"  # source_hash's options
    run(PROG, args, lambda: export(args, family_of(args.model_dir)))


if __name__ == "__main__":
    main(sys.argv[1:])
