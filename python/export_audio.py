#!/usr/bin/env python3
"""Turns a Hugging Face audio classifier into a torch-node folder for torch-node's audio-classification pipeline.

    python export_audio.py MODEL_DIR OUT_DIR [--format torchscript]

Architectures: Wav2Vec2ForSequenceClassification, HubertForSequenceClassification and
WavLMForSequenceClassification (a Wav2Vec2FeatureExtractor: raw 16 kHz samples in). It writes into OUT_DIR:

  model.pt        the model traced: input_values float32 [1, samples] -> logits float32 [1, labels]
                  (checked against the eager model at three lengths);
  preprocess.pt   Wav2Vec2FeatureExtractor as TorchScript: samples float32 [samples] -> input_values
                  [1, samples], zero-mean unit-variance normalized where do_normalize
                  ((x - mean) / sqrt(var + 1e-7), as zero_mean_unit_var_norm);
  manifest.json   kind 'audio-classification', id2label, problemType, samplingRate, minSamples (the
                  shortest input the convolutional feature encoder takes).

Exit status: 0 written; 1 the export failed; 2 bad arguments or an unsupported model; 3 torch or
transformers is missing. Every failure is one line on stderr.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import Unsupported, log, parser, read_config, run, staged_folder, trace, with_script, write_manifest  # noqa: E402
from export_text import source_hash  # noqa: E402

FORMAT_VERSION = 1
PROG = "export_audio.py"
ARCHITECTURES = ("Wav2Vec2ForSequenceClassification", "HubertForSequenceClassification",
                 "WavLMForSequenceClassification")
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


def min_samples(config):
    """The shortest input whose feature encoder output has one frame: each conv needs `kernel` inputs."""
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
    if name != "Wav2Vec2FeatureExtractor" or extractor.feature_size != 1:
        raise Unsupported(f"{name} (feature_size {getattr(extractor, 'feature_size', None)}): only a "
                          "Wav2Vec2FeatureExtractor of raw samples is supported")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_values):
            return self.model(input_values=input_values).logits.float()

    module = Model().eval()
    gen = torch.Generator().manual_seed(0)
    shortest = min_samples(model.config)
    examples = [torch.randn(1, n, generator=gen) for n in (16000, 3 * shortest + 7, 41000)]
    with staged_folder(args.out_dir, FILES) as tmp:
        torch.jit.script(Preprocess(torch, bool(extractor.do_normalize))).save(os.path.join(tmp, "preprocess.pt"))
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
                      "input": {"name": "input_values", "shape": [1, "samples"]},
                      "output": {"name": "logits", "shape": [1, config.num_labels]}},
            "preprocess": "preprocess.pt",
            "featureExtractor": {"name": name, "doNormalize": bool(extractor.do_normalize),
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
    args = parser(PROG, "Export an audio classifier to a torch-node folder.",
                  "a Hugging Face Wav2Vec2, HuBERT or WavLM classifier folder", max_batch=64).parse_args(argv)
    if args.format == "pt2":
        print(f"{PROG}: --format pt2 is not supported (the model is traced: TorchScript)", file=sys.stderr)
        sys.exit(2)
    args.dtype = "float32"  # source_hash's options
    run(PROG, args, lambda: export(args, architecture_of(args.model_dir)))


if __name__ == "__main__":
    main(sys.argv[1:])
