#!/usr/bin/env python3
"""Random-weight Wav2Vec2 and AST audio classifiers, their exports and transformers' audio-classification goldens.

Usage (from the repository root):

    .libtorch/bin/python models/make_audio_models.py [--out models/golden/audio]

Writes (all generated, under models/golden/, which git ignores):

  audio/wav2vec2-src/   Wav2Vec2ForSequenceClassification (seed 0: hidden 16, 2 layers, two
                        convolutions, 4 labels) and its Wav2Vec2FeatureExtractor (16 kHz, normalized)
  audio/ast-src/        ASTForAudioClassification (seed 0: hidden 16, 2 layers, 32 mel bins, 64
                        frames, 4 labels) and its ASTFeatureExtractor (16 kHz, AudioSet mean and std)
  audio/<name>/         that folder exported by python/export_audio.py (TorchScript)
  audio/goldens.json    per model and clip of CLIPS (float32 16 kHz samples, base64): the feature
                        extractor's input_values and pipeline('audio-classification')'s answer to
                        each of CALLS. The AST goldens are transformers' numpy filter banks: run
                        this with a Python without torchaudio (with it, transformers uses Kaldi's)

Idempotent: the source is rewritten only when its recipe changes, the export only when its source
or python/export_audio.py changed, the goldens only when the export or the inputs changed.
"""

import argparse
import base64
import os
import shutil

from fixture_common import HERE, ROOT, exporter, logger, missing, read_json, up_to_date, write_json
from fixture_common import export as export_folder

PROG = "make_audio_models.py"
log = logger(PROG)
LABELS = {0: "yes", 1: "no", 2: "up", 3: "down"}
MODELS = ("wav2vec2", "ast")
# Seeded clips: (name, samples, kind): a noisy tone, loud noise, the shortest input the model takes.
CLIPS = [["tone", 16000, "tone"], ["noise", 23456, "noise"], ["short", 400, "noise"]]
CALLS = [{}, {"top_k": 2}, {"top_k": 9, "function_to_apply": "sigmoid"}, {"function_to_apply": "none"}]
CAMEL = {"top_k": "topK", "function_to_apply": "functionToApply"}


def recipe(name):
    """(model, feature extractor) of a random-weight classifier: tiny, seeded."""
    import torch
    from transformers import (ASTConfig, ASTFeatureExtractor, ASTForAudioClassification, Wav2Vec2Config,
                              Wav2Vec2FeatureExtractor, Wav2Vec2ForSequenceClassification)

    torch.manual_seed(0)
    labels = dict(num_labels=len(LABELS), id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    if name == "ast":
        config = ASTConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                           patch_size=16, frequency_stride=10, time_stride=10, max_length=64, num_mel_bins=32,
                           **labels)
        return ASTForAudioClassification(config).eval(), ASTFeatureExtractor(num_mel_bins=32, max_length=64)
    config = Wav2Vec2Config(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                            conv_dim=(8, 8), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=2, classifier_proj_size=8, **labels)
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                                         return_attention_mask=False)
    return Wav2Vec2ForSequenceClassification(config).eval(), extractor


def make_source(folder, name):
    import torch

    marker = os.path.join(folder, "make_audio_models.json")
    want = {"name": name, "seed": 0, "v": 1}
    if read_json(marker) == want:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight {name} classifier")
    model, extractor = recipe(name)
    head = model.classifier if name == "wav2vec2" else model.classifier.dense
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        # transformers' init makes near-equal logits: re-drawn wider, so that the order means something.
        head.weight.copy_(torch.randn(head.weight.shape, generator=gen))
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    extractor.save_pretrained(folder)
    write_json(marker, want)


def clip(samples, kind, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(samples) / 16000
    if kind == "tone":
        return (0.3 * np.sin(2 * np.pi * 440 * t) + 0.01 * rng.standard_normal(samples)).astype(np.float32)
    return (0.5 * rng.standard_normal(samples)).astype(np.float32)


def b64(array):
    return base64.b64encode(array.tobytes()).decode("ascii")


def goldens(source):
    from transformers import AutoFeatureExtractor, pipeline

    run = pipeline("audio-classification", model=source, device="cpu")
    extractor = AutoFeatureExtractor.from_pretrained(source)
    entries = []
    for seed, (name, samples, kind) in enumerate(CLIPS):
        audio = clip(samples, kind, seed)
        values = extractor(audio, sampling_rate=16000, return_tensors="np")["input_values"]
        calls = [{"options": {CAMEL[k]: v for k, v in kwargs.items()}, "result": run(audio.copy(), **kwargs)}
                 for kwargs in CALLS]
        entries.append({"clip": name, "samples": b64(audio), "inputValues": b64(values.astype("float32")),
                        "calls": calls})
    return entries


def main():
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--out", default=os.path.join(HERE, "golden", "audio"))
    args = parser.parse_args()
    lacking = missing(("torch", "transformers", "numpy"))
    if lacking:
        log(f"skipped: missing Python packages {', '.join(lacking)}")
        return
    if not missing(("torchaudio",)):
        log("note: torchaudio is installed, so transformers' AST features are Kaldi's: the AST goldens differ")
    os.makedirs(args.out, exist_ok=True)
    options = argparse.Namespace(dtype="float32", format="torchscript", max_batch=64, fast_compile=False)
    hashes = {}
    for name in MODELS:
        source, out = os.path.join(args.out, f"{name}-src"), os.path.join(args.out, name)
        make_source(source, name)
        want = exporter("export_audio").audio_hash(source, options)
        manifest = export_folder(log, "export_audio", source, out, want, ["--format", "torchscript"])
        hashes[name] = manifest["source"]["hash"]
    path = os.path.join(args.out, "goldens.json")
    stamp = {"exportHashes": hashes, "clips": CLIPS, "calls": CALLS}
    if up_to_date(log, path, stamp):
        return
    import transformers

    write_json(path, {"source": "transformers pipeline('audio-classification', model=dir)",
                      "transformers": transformers.__version__, **stamp,
                      **{name: {"task": "audio-classification", "results": goldens(os.path.join(args.out, f"{name}-src"))}
                         for name in MODELS}})
    log(f"{os.path.relpath(path, ROOT)}: written")


if __name__ == "__main__":
    main()
