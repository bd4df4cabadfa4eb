#!/usr/bin/env python3
"""Turns a Hugging Face CLIPModel or SiglipModel checkpoint into a torch-node model folder.

    python export_clip.py MODEL_DIR OUT_DIR [--format auto|pt2|torchscript] [--max-batch 256]
                          [--fast-compile]

Run with your own Python, torch and transformers (`npx torch-node export` runs it for a folder
whose config.json's architectures name CLIPModel or SiglipModel). It writes into OUT_DIR:

  text.pt2 / text.pt    get_text_features: input_ids (and attention_mask where the tokenizer makes
                        one), int64 [batch, seq], right-padded -> float32 [batch, dim], not
                        normalized;
  image.pt2 / image.pt  get_image_features: pixel_values float32 [batch, 3, H, W] -> [batch, dim];
  preprocess.pt         the checkpoint's image processor as TorchScript: uint8 RGB [3, h, w] ->
                        pixel_values [3, H, W]. It runs the same ATen kernels transformers 5's
                        torchvision backend runs (antialiased bicubic or bilinear resize of uint8,
                        its center crop, its fused rescale-and-normalize), so the pixels agree
                        exactly on the same libtorch;
  tokenizer.json        (+ tokenizer_config.json, special_tokens_map.json);
  manifest.json         kind 'clip': the family (clip softmax / siglip sigmoid), logit scale and
                        bias, the text padding transformers' pipeline uses, the processor settings.

Exit status: 0 written; 1 the export failed; 2 bad arguments or an unsupported model; 3 torch or
transformers is missing. Every failure is one line on stderr.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import (Unsupported, compile_pt2, image_processor_base, image_processor_basics, log, parser, read_config,  # noqa: E402
                           run, staged_folder, trace, with_script, write_manifest)
from export_text import TOKENIZER_FILES, copy_tokenizer, source_hash  # noqa: E402

FORMAT_VERSION = 1
PROG = "export_clip.py"
ARCHITECTURES = {"CLIPModel": "clip", "SiglipModel": "siglip"}
# transformers 5's ZeroShotImageClassificationPipeline.preprocess: SigLIP pads to 64 tokens.
SIGLIP_TEXT_LENGTH = 64


def clip_hash(model_dir, args):
    """The folder, the options and this script: make_clip_models.py skips an unchanged export."""
    return with_script(source_hash(model_dir, args), __file__)


def family_of(model_dir):
    """'clip' or 'siglip' from config.json's architectures (or model_type), else Unsupported."""
    config = read_config(model_dir)
    for name in config.get("architectures") or []:
        if name in ARCHITECTURES:
            return ARCHITECTURES[name]
    if config.get("model_type") in ("clip", "siglip"):
        return config["model_type"]
    raise Unsupported(f"{model_dir}: architectures {config.get('architectures')} are not CLIPModel or SiglipModel")


def processor_settings(processor):
    """The image processor's resolved settings, as the preprocessing program applies them."""
    name, resample, normalization = image_processor_basics(processor)
    size = dict(processor.size) if processor.do_resize else {}
    size = {k: v for k, v in size.items() if v is not None}
    if processor.do_resize and not ("shortest_edge" in size and len(size) == 1 or {"height", "width"} == set(size)):
        raise Unsupported(f"{name}: size {size} (supported: shortest_edge, or height and width)")
    crop = {k: v for k, v in dict(processor.crop_size or {}).items() if v is not None}
    return {
        "processor": name,
        "doResize": bool(processor.do_resize),
        "size": size,
        "resample": resample,
        "doCenterCrop": bool(getattr(processor, "do_center_crop", False)),
        "cropSize": crop,
        **normalization,
    }


def Preprocess(torch, s):
    """transformers 5's TorchvisionBackend._preprocess for one uint8 [3, h, w] image, scripted."""
    F = torch.nn.functional
    shortest = int(s["size"].get("shortest_edge", 0)) if s["doResize"] else 0
    height, width = (int(s["size"].get("height", 0)), int(s["size"].get("width", 0))) if s["doResize"] else (0, 0)
    crop_h, crop_w = (int(s["cropSize"]["height"]), int(s["cropSize"]["width"])) if s["doCenterCrop"] else (0, 0)
    mode = s["resample"]

    class ImageProcessor(image_processor_base(torch, s)):
        def __init__(self):
            super().__init__()
            self.shortest, self.height, self.width = shortest, height, width
            self.crop_h, self.crop_w = crop_h, crop_w
            self.do_resize, self.do_crop = s["doResize"], s["doCenterCrop"]
            self.mode = mode

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = image.unsqueeze(0)
            h, w = x.shape[-2], x.shape[-1]
            if self.do_resize:
                if self.shortest > 0:
                    # get_resize_output_image_size(default_to_square=False): the long side truncated.
                    if w <= h:
                        nh, nw = int(self.shortest * h / w), self.shortest
                    else:
                        nh, nw = self.shortest, int(self.shortest * w / h)
                else:
                    nh, nw = self.height, self.width
                if nh != h or nw != w:
                    # torchvision resize_image: uint8 stays uint8 for bicubic on CPU (native kernel).
                    x = F.interpolate(x, size=[nh, nw], mode=self.mode, align_corners=False, antialias=True)
            if self.do_crop:
                h, w = x.shape[-2], x.shape[-1]
                if self.crop_w > w or self.crop_h > h:
                    pw, ph = max(self.crop_w - w, 0), max(self.crop_h - h, 0)
                    x = F.pad(x, [pw // 2, (pw + 1) // 2, ph // 2, (ph + 1) // 2])
                    h, w = x.shape[-2], x.shape[-1]
                top, left = int((h - self.crop_h) / 2.0), int((w - self.crop_w) / 2.0)
                x = x[:, :, top:top + self.crop_h, left:left + self.crop_w]
            return self.finish(x[0])

    return ImageProcessor().eval()


def towers(torch, model):
    class Text(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask=None):
            out = self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask)
            return out.pooler_output.float()

    class Image(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            return self.model.get_image_features(pixel_values=pixel_values).pooler_output.float()

    return Text().eval(), Image().eval()


def compile_program(torch, module, example, dynamic, name, args, out):
    """`name`.pt2 (torch.export + AOTInductor) or, where that fails or is asked, `name`.pt (trace)."""
    if args.format in ("auto", "pt2"):
        try:
            exported = torch.export.export(module, example, dynamic_shapes=dynamic, strict=False)
            log(f"AOTInductor: compiling the {name} tower")
            return f"{name}.pt2", "pt2", compile_pt2(torch, exported, os.path.join(out, f"{name}.pt2"), args.fast_compile)
        except Exception as e:  # noqa: BLE001 - reported, then the fallback
            if args.format == "pt2":
                raise
            log(f"torch.export of the {name} tower failed ({type(e).__name__}); falling back to TorchScript")
    log(f"torch.jit.trace: the {name} tower")
    return f"{name}.pt", "torchscript", trace(torch, module, example, os.path.join(out, f"{name}.pt"))


def export(args, family):
    import torch
    import transformers
    from torch.export import Dim
    from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

    started = time.monotonic()
    log(f"loading {args.model_dir} ({family})")
    model = AutoModel.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    processor = AutoImageProcessor.from_pretrained(args.model_dir)
    settings = processor_settings(processor)
    text_config, vision_config = model.config.text_config, model.config.vision_config
    max_positions = int(text_config.max_position_embeddings)
    image_size = int(vision_config.image_size)
    with_mask = "attention_mask" in tokenizer.model_input_names
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    text, image = towers(torch, model)

    gen = torch.Generator().manual_seed(0)
    seq = min(8, max_positions)
    ids = torch.randint(5, max(6, text_config.vocab_size), (2, seq), generator=gen)
    text_example = (ids, torch.ones(2, seq, dtype=torch.int64)) if with_mask else (ids,)
    pixels = torch.randn(2, 3, image_size, image_size, generator=gen)
    batch = Dim("batch", min=1, max=args.max_batch)
    sequence = Dim("sequence", min=1, max=max_positions)

    files = ("text.pt2", "text.pt", "image.pt2", "image.pt", "preprocess.pt", "manifest.json", *TOKENIZER_FILES)
    with staged_folder(args.out_dir, files) as tmp:
        log("torch.jit.script: the image processor")
        torch.jit.script(Preprocess(torch, settings)).save(os.path.join(tmp, "preprocess.pt"))
        with torch.no_grad():
            text_dynamic = tuple({0: batch, 1: sequence} for _ in text_example)
            text_file, text_format, text_run = compile_program(torch, text, text_example, text_dynamic, "text", args, tmp)
            image_file, image_format, image_run = compile_program(
                torch, image, (pixels,), ({0: batch},), "image", args, tmp)
            diff = 0.0
            for b, s in ((3, min(5, max_positions)), (1, min(11, max_positions))):
                ids = torch.randint(5, max(6, text_config.vocab_size), (b, s), generator=gen)
                example = (ids, torch.ones(b, s, dtype=torch.int64)) if with_mask else (ids,)
                diff = max(diff, (text_run(*example) - text(*example)).abs().max().item())
                px = torch.randn(b, 3, image_size, image_size, generator=gen)
                diff = max(diff, (image_run(px) - image(px)).abs().max().item())
        if not diff <= 1e-4:
            raise RuntimeError(f"the exported towers differ from the eager model by {diff:.3g} (> 1e-4)")
        log(f"checked against the eager model: max abs diff {diff:.3g}")

        copy_tokenizer(args.model_dir, tokenizer, tmp)
        dim = int(text(*text_example).shape[-1])
        bias = getattr(model, "logit_bias", None)
        manifest = {
            "format": "torch-node/clip-model",
            "formatVersion": FORMAT_VERSION,
            "kind": "clip",
            "family": family,  # clip: softmax over the labels; siglip: sigmoid of each
            "text": {"program": text_file, "programFormat": text_format,
                     "inputs": ["input_ids", "attention_mask"] if with_mask else ["input_ids"]},
            "image": {"program": image_file, "programFormat": image_format,
                      "input": {"name": "pixel_values", "shape": ["batch", 3, image_size, image_size]}},
            "preprocess": "preprocess.pt",
            "imageProcessor": settings,
            "dim": dim,
            "logitScale": float(model.logit_scale.exp().item()),  # already exp()'d, as forward uses it
            "logitBias": float(bias.item()) if bias is not None else None,
            "padTokenId": pad_id,
            # How transformers' zero-shot pipeline pads the label sentences.
            "textPadding": {"strategy": "max_length", "length": SIGLIP_TEXT_LENGTH} if family == "siglip"
            else {"strategy": "longest"},
            "maxSequenceLength": max_positions,
            "imageSize": image_size,
            # The batch sizes a .pt2 tower accepts (export --max-batch).
            "maxBatch": args.max_batch if "pt2" in (text_format, image_format) else None,
            "tokenizer": "tokenizer.json",
            "dtype": "float32",
            "source": {"modelType": model.config.model_type, "architectures": model.config.architectures,
                       "hash": clip_hash(args.model_dir, args)},
            "exportedWith": {"torch": torch.__version__, "transformers": transformers.__version__},
            "checkedMaxAbsDiff": diff,
        }
        write_manifest(tmp, manifest)
    log(f"wrote {args.out_dir} ({family}, {text_format}/{image_format}, {dim}-dim) "
        f"in {time.monotonic() - started:.0f} s")


def main(argv):
    args = parser(PROG, "Export a CLIP or SigLIP model to a torch-node folder.",
                  "a Hugging Face CLIPModel or SiglipModel folder", max_batch=256).parse_args(argv)
    args.dtype = "float32"  # source_hash's options
    run(PROG, args, lambda: export(args, family_of(args.model_dir)))


if __name__ == "__main__":
    main(sys.argv[1:])
