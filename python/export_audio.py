#!/usr/bin/env python3
"""Turns a Hugging Face audio classifier into a torch-node folder for torch-node's audio-classification pipeline.

    python export_audio.py MODEL_DIR OUT_DIR [--format auto|torchscript]

Architectures: Wav2Vec2ForSequenceClassification, HubertForSequenceClassification and
WavLMForSequenceClassification (a Wav2Vec2FeatureExtractor: raw 16 kHz samples in), and
ASTForAudioClassification (an ASTFeatureExtractor: log-mel filter banks). It writes into OUT_DIR:

  model.pt        the model traced: input_values float32 [1, samples] (AST: [1, max_length,
                  num_mel_bins]) -> logits float32 [1, labels] (checked against the eager model at
                  three lengths);
  preprocess.pt   the feature extractor as TorchScript: samples float32 [samples] -> input_values.
                  Wav2Vec2FeatureExtractor: zero-mean unit-variance normalized where do_normalize
                  ((x - mean) / sqrt(var + 1e-7), as zero_mean_unit_var_norm). ASTFeatureExtractor:
                  the filter banks transformers computes where torchaudio is not installed
                  (audio_utils.spectrogram: 400-sample frames every 160, DC offset removed,
                  pre-emphasis 0.97, Hann window, 512-point FFT in float64 stored as complex64, power,
                  kaldi-scale mel filters, log), padded or cut to max_length frames, then
                  (x - mean) / (2 std);
  manifest.json   kind 'audio-classification', id2label, problemType, samplingRate, minSamples (the
                  shortest input the feature encoder takes: its receptive field, or one AST frame).

Exit status: 0 written; 1 the export failed; 2 bad arguments or an unsupported model; 3 torch or
transformers is missing. Every failure is one line on stderr.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import Unsupported, log, read_config, run, staged_folder, trace, with_script, write_manifest  # noqa: E402
from export_text import source_hash  # noqa: E402

FORMAT_VERSION = 1
PROG = "export_audio.py"
ARCHITECTURES = ("Wav2Vec2ForSequenceClassification", "HubertForSequenceClassification",
                 "WavLMForSequenceClassification", "ASTForAudioClassification")
# ASTFeatureExtractor without torchaudio (transformers' numpy path): frames, hop, FFT size, floor.
AST_FRAME, AST_HOP, AST_FFT, AST_MEL_FLOOR = 400, 160, 512, 1.192092955078125e-07
FILES = ("model.pt", "preprocess.pt", "manifest.json")


def audio_hash(model_dir, args):
    """The folder, the options and this script: the fixture script skips an unchanged export."""
    return with_script(source_hash(model_dir, args), __file__)


def architecture_of(model_dir):
    config = read_config(model_dir)
    for name in config.get("architectures") or []:
        if name in ARCHITECTURES:
            return name
    raise Unsupported(f"{model_dir}: architectures {config.get('architectures')} are not one of "
                      f"{', '.join(ARCHITECTURES)}")


def Preprocess(torch, do_normalize):
    """Wav2Vec2FeatureExtractor of one unpadded input, scripted."""

    class FeatureExtractor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.do_normalize = do_normalize

        def forward(self, samples: torch.Tensor) -> torch.Tensor:
            x = samples.to(torch.float32)
            if self.do_normalize:
                x = (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + 1e-7)
            return x.unsqueeze(0)

    return FeatureExtractor().eval()


def Fbank(torch, extractor):
    """ASTFeatureExtractor of one input, scripted: transformers' numpy spectrogram (its window and
    mel filters, made by the same audio_utils calls) in float64, then its padding and normalization."""
    import numpy as np
    from transformers.audio_utils import mel_filter_bank, window_function

    # as ASTFeatureExtractor.__init__ makes them where torchaudio is missing
    mel_filters = mel_filter_bank(num_frequency_bins=AST_FFT // 2 + 1, num_mel_filters=extractor.num_mel_bins,
                                  min_frequency=20, max_frequency=extractor.sampling_rate // 2,
                                  sampling_rate=extractor.sampling_rate, norm=None, mel_scale="kaldi",
                                  triangularize_in_mel_space=True)
    window = window_function(AST_FRAME, "hann", periodic=False)

    class FeatureExtractor(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("window", torch.from_numpy(np.asarray(window, dtype=np.float64)))
            self.register_buffer("mel_filters", torch.from_numpy(np.asarray(mel_filters, dtype=np.float64)))
            self.max_length = int(extractor.max_length)
            self.do_normalize = bool(extractor.do_normalize)
            self.mean, self.std = float(extractor.mean), float(extractor.std)
            # TorchScript reads no module globals
            self.frame, self.hop, self.fft, self.mel_floor = AST_FRAME, AST_HOP, AST_FFT, AST_MEL_FLOOR

        def forward(self, samples: torch.Tensor) -> torch.Tensor:
            x = samples.to(torch.float64)
            frames = x.unfold(0, self.frame, self.hop)
            frames = frames - frames.mean(dim=1, keepdim=True)
            # numpy's in-place `buffer[1:] -= 0.97 * buffer[:-1]` reads the values before the update
            frames = torch.cat([frames[:, :1] * (1 - 0.97), frames[:, 1:] - 0.97 * frames[:, :-1]], dim=1)
            spectrum = torch.fft.rfft(frames * self.window, n=self.fft, dim=1)
            # spectrogram() stores the FFT as complex64, then takes abs in float64
            power = spectrum.to(torch.complex64).to(torch.complex128).abs() ** 2.0
            mel = torch.clamp(torch.matmul(self.mel_filters.t(), power.t()), min=self.mel_floor)
            fbank = torch.log(mel).t().to(torch.float32)
            frames_count = fbank.shape[0]
            if frames_count < self.max_length:
                fbank = torch.cat([fbank, torch.zeros(self.max_length - frames_count, fbank.shape[1])])
            else:
                fbank = fbank[: self.max_length]
            if self.do_normalize:
                fbank = (fbank - self.mean) / (self.std * 2)
            return fbank.unsqueeze(0)

    return FeatureExtractor().eval()


def min_samples(config):
    """The shortest input whose feature encoder output has one frame: each conv needs `kernel` inputs
    (AST: one 400-sample frame)."""
    if config.model_type == "audio-spectrogram-transformer":
        return AST_FRAME
    length = 1
    for kernel, stride in reversed(list(zip(config.conv_kernel, config.conv_stride))):
        length = (length - 1) * stride + kernel
    return length


def export(args, architecture):
    import torch
    import transformers
    from transformers import AutoFeatureExtractor, AutoModelForAudioClassification

    started = time.monotonic()
    log(f"loading {args.model_dir} ({architecture})")
    model = AutoModelForAudioClassification.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    extractor = AutoFeatureExtractor.from_pretrained(args.model_dir)
    name = type(extractor).__name__
    if name == "ASTFeatureExtractor":
        preprocess = Fbank(torch, extractor)
    elif name == "Wav2Vec2FeatureExtractor" and extractor.feature_size == 1:
        preprocess = Preprocess(torch, bool(extractor.do_normalize))
    else:
        raise Unsupported(f"{name} (feature_size {getattr(extractor, 'feature_size', None)}): only a "
                          "Wav2Vec2FeatureExtractor of raw samples or an ASTFeatureExtractor is supported")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_values):
            return self.model(input_values=input_values).logits.float()

    module = Model().eval()
    gen = torch.Generator().manual_seed(0)
    shortest = min_samples(model.config)
    # the model's inputs as the feature extractor makes them from clips of three lengths
    examples = [preprocess(torch.randn(n, generator=gen)) for n in (16000, 3 * shortest + 7, 41000)]
    with staged_folder(args.out_dir, FILES) as tmp:
        torch.jit.script(preprocess).save(os.path.join(tmp, "preprocess.pt"))
        with torch.no_grad():
            log("torch.jit.trace: the model")
            program = trace(torch, module, (examples[0],), os.path.join(tmp, "model.pt"))
            diff = max((program(x) - module(x)).abs().max().item() for x in examples)
        if not diff <= 1e-5:
            raise RuntimeError(f"the traced model differs from the eager model by {diff:.3g}")
        log(f"checked against the eager model at {len(examples)} lengths: max abs diff {diff:.3g}")
        config = model.config
        write_manifest(tmp, {
            "format": "torch-node/audio-model",
            "formatVersion": FORMAT_VERSION,
            "kind": "audio-classification",
            "model": {"program": "model.pt", "programFormat": "torchscript",
                      "input": {"name": "input_values", "shape": list(examples[0].shape[:1]) + (
                          ["samples"] if examples[0].ndim == 2 else list(examples[0].shape[1:]))},
                      "output": {"name": "logits", "shape": [1, config.num_labels]}},
            "preprocess": "preprocess.pt",
            "featureExtractor": {"name": name, "doNormalize": bool(extractor.do_normalize),
                                 "maxLength": getattr(extractor, "max_length", None),
                                 "numMelBins": getattr(extractor, "num_mel_bins", None),
                                 "samplingRate": int(extractor.sampling_rate)},
            "samplingRate": int(extractor.sampling_rate),
            "minSamples": shortest,
            "numLabels": config.num_labels,
            "id2label": {str(k): v for k, v in config.id2label.items()},
            "problemType": config.problem_type,
            "dtype": "float32",
            "source": {"modelType": config.model_type, "architectures": config.architectures,
                       "hash": audio_hash(args.model_dir, args)},
            "exportedWith": {"torch": torch.__version__, "transformers": transformers.__version__},
            "checkedMaxAbsDiff": diff,
        })
    log(f"wrote {args.out_dir} (audio-classification) in {time.monotonic() - started:.0f} s")


def main(argv):
    p = argparse.ArgumentParser(prog=PROG, description="Export an audio classifier to a torch-node folder.")
    p.add_argument("model_dir", help="a Hugging Face Wav2Vec2, HuBERT, WavLM or AST classifier folder")
    p.add_argument("out_dir", help="the torch-node model folder to write")
    p.add_argument("--format", choices=("auto", "torchscript"), default="auto",
                   help="auto: TorchScript, the one format (the model is traced; one clip per forward)")
    args = p.parse_args(argv)
    # source_hash's options; run() checks max_batch, which a one-clip program has no use for
    args.dtype, args.format, args.max_batch, args.fast_compile = "float32", "torchscript", 64, False
    run(PROG, args, lambda: export(args, architecture_of(args.model_dir)))


if __name__ == "__main__":
    main(sys.argv[1:])
