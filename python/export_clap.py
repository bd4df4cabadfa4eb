#!/usr/bin/env python3
"""Turns a Hugging Face ClapModel checkpoint into a torch-node folder for zero-shot audio classification.

    python export_clap.py MODEL_DIR OUT_DIR [--format auto|torchscript]

Run with your own Python, torch and transformers (`npx torch-node export` runs it for a folder
whose config.json's architectures name ClapModel). It writes into OUT_DIR:

  text.pt         get_text_features traced: input_ids, attention_mask int64 [batch, seq] ->
                  float32 [batch, dim] (L2-normalized, as ClapModel returns it);
  audio.pt        get_audio_features traced: input_features float32 [batch, channels, frames,
                  mel bins] -> [batch, dim] (normalized). A fused model (enable_fusion) is traced with
                  is_longer all true: transformers' pipeline featurizes one clip at a time, and
                  ClapFeatureExtractor (truncation 'fusion') marks the only clip of a batch longer;
  preprocess.pt   ClapFeatureExtractor of one clip as TorchScript: samples float32 [samples] ->
                  input_features [channels, frames, mel bins]: in float64, the clip repeated and/or
                  zero-padded to max_length_s (its `padding`: repeatpad, repeat or pad), reflect-padded
                  by half a window, periodic Hann, rfft stored as complex64 (as audio_utils.spectrogram
                  does), power, the mel filters ('fusion': HTK; 'rand_trunc': Slaney), 10 log10 (floor
                  1e-10), float32; 'fusion' stacks the mel four times (channels 4), 'rand_trunc' once.
                  A clip longer than the maximum where transformers would pick random chunks (fusion)
                  or a random crop (rand_trunc) is refused (the pipeline checks first): only fusion's
                  one deterministic case, a clip that adds no frame, is taken whole, as transformers does;
  tokenizer.json  (+ tokenizer_config.json, special_tokens_map.json);
  manifest.json   kind 'clap': logit_scale_a.exp() (the scale of logits_per_audio, which the pipeline
                  softmaxes), the feature extractor's settings and the longest clip it takes.

Exit status: 0 written; 1 the export failed; 2 bad arguments or an unsupported model; 3 torch or
transformers is missing. Every failure is one line on stderr.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import Unsupported, log, read_config, run, staged_folder, trace, with_script, write_manifest  # noqa: E402
from export_text import TOKENIZER_FILES, copy_tokenizer, source_hash  # noqa: E402

FORMAT_VERSION = 1
PROG = "export_clap.py"
PADDINGS = ("repeatpad", "repeat", "pad")
# audio_utils.spectrogram's floor under the mel power, and power_to_db's (reference 1.0).
MEL_FLOOR = 1e-10


def clap_hash(model_dir, args):
    """The folder, the options and this script: make_clap_models.py skips an unchanged export."""
    return with_script(source_hash(model_dir, args), __file__)


def check_architecture(model_dir):
    config = read_config(model_dir)
    if "ClapModel" not in (config.get("architectures") or []) and config.get("model_type") != "clap":
        raise Unsupported(f"{model_dir}: architectures {config.get('architectures')} are not ClapModel")


def longest_clip(extractor):
    """The most samples a clip may have without transformers picking random parts of it: its max
    length, or for 'fusion' every length whose spectrogram has no more frames than that (taken whole)."""
    most, hop, odd = int(extractor.nb_max_samples), int(extractor.hop_length), extractor.fft_window_size % 2
    if extractor.truncation == "fusion":
        # its frames, 1 + (n + 2 (window // 2) - window) // hop, equal max // hop + 1
        return (most // hop + 1) * hop - 1 + odd
    return most


def Preprocess(torch, extractor):
    """ClapFeatureExtractor._get_input_mel of one clip at most longest_clip() long, scripted."""
    import numpy as np
    from transformers.audio_utils import window_function

    fusion = extractor.truncation == "fusion"
    filters = extractor.mel_filters if fusion else extractor.mel_filters_slaney
    window = window_function(extractor.fft_window_size, "hann")
    F = torch.nn.functional

    class FeatureExtractor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("window", torch.from_numpy(np.asarray(window, dtype=np.float64)))
            self.register_buffer("mel_filters", torch.from_numpy(np.asarray(filters, dtype=np.float64)))
            self.max_samples = int(extractor.nb_max_samples)
            self.longest = longest_clip(extractor)
            self.frame, self.hop = int(extractor.fft_window_size), int(extractor.hop_length)
            self.padding, self.channels = str(extractor.padding), 4 if fusion else 1
            self.mel_floor = MEL_FLOOR

        def forward(self, samples: torch.Tensor) -> torch.Tensor:
            x = samples.to(torch.float64)
            n = x.shape[0]
            if n < 1 or n > self.longest:
                raise RuntimeError(f"a clip of {n} samples: this extractor takes 1 to {self.longest}")
            if n < self.max_samples:
                if self.padding == "repeat":
                    x = x.repeat(self.max_samples // n + 1)[: self.max_samples]
                elif self.padding == "repeatpad":
                    x = x.repeat(self.max_samples // n)
                x = F.pad(x, [0, self.max_samples - x.shape[0]])
            half = self.frame // 2
            x = F.pad(x.view(1, 1, -1), [half, half], mode="reflect").view(-1)
            frames = x.unfold(0, self.frame, self.hop) * self.window
            spectrum = torch.fft.rfft(frames, n=self.frame, dim=1)
            # spectrogram() stores the FFT as complex64, then np.abs(..., dtype=float64) ** 2
            power = spectrum.to(torch.complex64).to(torch.complex128).abs() ** 2.0
            mel = torch.clamp(torch.matmul(self.mel_filters.t(), power.t()), min=self.mel_floor)
            db = (10.0 * torch.log10(torch.clamp(mel, min=self.mel_floor))).to(torch.float32).t()
            return db.unsqueeze(0).expand(self.channels, -1, -1).contiguous()

    return FeatureExtractor().eval()


def towers(torch, model, fusion):
    class Text(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            out = self.model.get_text_features(input_ids=input_ids, attention_mask=attention_mask)
            return out.pooler_output.float()

    class Audio(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_features):
            longer = torch.ones(input_features.shape[0], 1, dtype=torch.bool) if fusion else None
            return self.model.get_audio_features(input_features=input_features, is_longer=longer).pooler_output.float()

    return Text().eval(), Audio().eval()


def export(args):
    import torch
    import transformers
    from transformers import AutoFeatureExtractor, AutoTokenizer, ClapModel

    started = time.monotonic()
    log(f"loading {args.model_dir} (ClapModel)")
    model = ClapModel.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    extractor = AutoFeatureExtractor.from_pretrained(args.model_dir)
    name = type(extractor).__name__
    if name != "ClapFeatureExtractor":
        raise Unsupported(f"{name}: only a ClapFeatureExtractor is supported")
    if extractor.truncation not in ("fusion", "rand_trunc") or extractor.padding not in PADDINGS:
        raise Unsupported(f"{name}: truncation {extractor.truncation!r} / padding {extractor.padding!r} "
                          f"(supported: fusion or rand_trunc; {', '.join(PADDINGS)})")
    fusion = extractor.truncation == "fusion"
    if fusion != bool(model.config.audio_config.enable_fusion):
        raise Unsupported(f"{name}: truncation {extractor.truncation!r} with enable_fusion "
                          f"{model.config.audio_config.enable_fusion}: the model cannot take these features")
    text_config = model.config.text_config
    # Roberta positions start after the padding index: the longest text the position table holds.
    max_tokens = int(text_config.max_position_embeddings) - int(text_config.pad_token_id or 0) - 1
    model_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max, int) and 0 < model_max < max_tokens:
        max_tokens = model_max
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    preprocess = Preprocess(torch, extractor)
    text, audio = towers(torch, model, fusion)

    gen = torch.Generator().manual_seed(0)
    vocab = int(text_config.vocab_size)
    rate = int(extractor.sampling_rate)
    features = [preprocess(torch.randn(n, generator=gen)) for n in (rate // 3, int(extractor.nb_max_samples))]
    files = ("text.pt", "audio.pt", "preprocess.pt", "manifest.json", *TOKENIZER_FILES)
    with staged_folder(args.out_dir, files) as tmp:
        log("torch.jit.script: the feature extractor")
        torch.jit.script(preprocess).save(os.path.join(tmp, "preprocess.pt"))
        with torch.no_grad():
            ids = torch.randint(5, max(6, vocab), (2, 7), generator=gen)
            log("torch.jit.trace: the text tower")
            text_run = trace(torch, text, (ids, torch.ones_like(ids)), os.path.join(tmp, "text.pt"))
            log("torch.jit.trace: the audio tower")
            audio_run = trace(torch, audio, (torch.stack(features),), os.path.join(tmp, "audio.pt"))
            diff = 0.0
            for b, s in ((3, 5), (1, min(11, max_tokens))):
                ids = torch.randint(5, max(6, vocab), (b, s), generator=gen)
                mask = torch.ones_like(ids)
                diff = max(diff, (text_run(ids, mask) - text(ids, mask)).abs().max().item())
            for batch in ([features[0]], [features[1], features[0], features[1]]):
                x = torch.stack(batch)
                diff = max(diff, (audio_run(x) - audio(x)).abs().max().item())
        if not diff <= 1e-5:
            raise RuntimeError(f"the traced towers differ from the eager model by {diff:.3g} (> 1e-5)")
        log(f"checked against the eager model: max abs diff {diff:.3g}")

        copy_tokenizer(args.model_dir, tokenizer, tmp)
        with torch.no_grad():
            dim = int(text(ids, mask).shape[-1])
        write_manifest(tmp, {
            "format": "torch-node/clap-model",
            "formatVersion": FORMAT_VERSION,
            "kind": "clap",
            "text": {"program": "text.pt", "programFormat": "torchscript", "inputs": ["input_ids", "attention_mask"]},
            "audio": {"program": "audio.pt", "programFormat": "torchscript",
                      "input": {"name": "input_features", "shape": ["batch", *features[0].shape]}},
            "preprocess": "preprocess.pt",
            "featureExtractor": {"name": name, "truncation": extractor.truncation, "padding": extractor.padding,
                                 "samplingRate": rate, "maxLengthS": extractor.max_length_s,
                                 "maxSamples": int(extractor.nb_max_samples), "hopLength": int(extractor.hop_length),
                                 "fftWindowSize": int(extractor.fft_window_size),
                                 "featureSize": int(extractor.feature_size)},
            "samplingRate": rate,
            # The longest clip taken: longer ones transformers would cut at random (refused instead).
            "maxSamples": longest_clip(extractor),
            "fusion": fusion,
            "dim": dim,
            # logits_per_audio's scale, already exp()'d: the pipeline softmaxes those logits.
            "logitScale": float(model.logit_scale_a.exp().item()),
            "padTokenId": pad_id,
            "maxSequenceLength": max_tokens,
            "tokenizer": "tokenizer.json",
            "dtype": "float32",
            "source": {"modelType": model.config.model_type, "architectures": model.config.architectures,
                       "hash": clap_hash(args.model_dir, args)},
            "exportedWith": {"torch": torch.__version__, "transformers": transformers.__version__},
            "checkedMaxAbsDiff": diff,
        })
    log(f"wrote {args.out_dir} (clap, {'fused' if fusion else 'unfused'}, {dim}-dim) "
        f"in {time.monotonic() - started:.0f} s")


def main(argv):
    p = argparse.ArgumentParser(prog=PROG, description="Export a CLAP model to a torch-node folder.")
    p.add_argument("model_dir", help="a Hugging Face ClapModel folder")
    p.add_argument("out_dir", help="the torch-node model folder to write")
    p.add_argument("--format", choices=("auto", "torchscript"), default="auto",
                   help="auto: TorchScript, the one format (both towers are traced)")
    args = p.parse_args(argv)
    # source_hash's options; run() checks max_batch, which traced towers have no use for
    args.dtype, args.format, args.max_batch, args.fast_compile = "float32", "torchscript", 64, False
    run(PROG, args, lambda: (check_architecture(args.model_dir), export(args)))


if __name__ == "__main__":
    main(sys.argv[1:])
