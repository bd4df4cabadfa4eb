#!/usr/bin/env python3
"""A random-weight VITS (MMS-TTS-like) model, its export and transformers' text-to-speech goldens.

Usage (from the repository root):

    .libtorch/bin/python models/make_tts_models.py [--out models/golden/tts]

Writes (all generated, under models/golden/, which git ignores):

  tts/vits-src/      VitsModel (seed 0: hidden 16, 2 layers, window 4, flow 8, two upsamplings
                     (8, 4): 32 samples a frame) with a hand-written MMS-like character vocab.json
                     (VitsTokenizer: add_blank, normalize, phonemize false)
  tts/vits/          that folder exported by python/export_tts.py
  tts/goldens.json   VitsTokenizer's input_ids for TOKENIZE (normalize true, false; no add_blank), and per (text, options) of CALLS the
                     waveform (float32, base64) of VitsModel(**tokenizer(text)) after
                     torch.manual_seed(seed), with the noise scales and speaking rate set

Idempotent: the source is rewritten only when its recipe changes, the export only when its source
or python/export_tts.py changed, the goldens only when the export changed.
"""

import argparse
import base64
import json
import os
import shutil

from fixture_common import HERE, ROOT, exporter, logger, missing, read_json, up_to_date, write_json

PROG = "make_tts_models.py"
log = logger(PROG)
# MMS-TTS's vocab.json is characters (a blank first); this one is smaller, with "<unk>" as a word.
CHARACTERS = ["_", " ", "'", "-", *"abcdefghijklmnopqrstuvwxyz", *"0123456789", "é", "<unk>"]
TOKENIZE = ["Hello, World!", "ab", "  spaced  out  ", "ÉCOLE é", "İstanbul", "x<unk>y", "<UNK>", "a_b",
            "emoji 🙂 here", "!!!", "", "tab\there\n", "MiXeD-CaSe 42", " _ ", "_b", "a _ b", "x <unk> y",
            "<unk>", "a<unk>"]
# (text, seed, options): upper case and punctuation (outside the vocab), short, long; noise scales
# 0 (the deterministic path), a faster and a slower speaking rate.
CALLS = [
    ["Hello, World!", 0, {}],
    ["ab", 555, {}],
    ["the quick brown fox jumps over the lazy dog", 42, {}],
    ["the quick brown fox jumps over the lazy dog", 42, {"noiseScale": 0, "noiseScaleDuration": 0}],
    ["Hello, World!", 7, {"speakingRate": 1.7, "noiseScale": 0.3, "noiseScaleDuration": 0.5}],
    ["MiXeD-CaSe 42", 2**40 + 3, {"speakingRate": 0.6}],
]


def make_source(folder):
    import torch
    from transformers import VitsConfig, VitsModel, VitsTokenizer

    marker = os.path.join(folder, "make_tts_models.json")
    want = {"seed": 0, "v": 1}
    if read_json(marker) == want:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight VITS")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    vocab = {c: i for i, c in enumerate(CHARACTERS)}
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=1)
    tokenizer = VitsTokenizer(os.path.join(folder, "vocab.json"), pad_token="_", unk_token="<unk>",
                              add_blank=True, normalize=True, phonemize=False, is_uroman=False)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = VitsConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        window_size=4, ffn_dim=32, flow_size=8, spectrogram_bins=9, upsample_initial_channel=16,
                        upsample_rates=[8, 4], upsample_kernel_sizes=[16, 8], resblock_kernel_sizes=[3],
                        resblock_dilation_sizes=[[1, 3]], duration_predictor_filter_channels=16,
                        duration_predictor_num_flows=2, depth_separable_num_layers=2,
                        prior_encoder_num_flows=2, prior_encoder_num_wavenet_layers=2,
                        posterior_encoder_num_wavenet_layers=2, sampling_rate=16000, pad_token_id=0)
    model = VitsModel(config).eval()
    model.save_pretrained(folder)
    write_json(marker, want)


def export_tts(source, out):
    """export_tts.py in this process, unless the folder's hash holds: a process of its own would
    import torch and transformers again (seconds of the CI job's CPU)."""
    module = exporter("export_tts")
    manifest = read_json(os.path.join(out, "manifest.json"))
    if manifest and manifest.get("source", {}).get("hash") == module.tts_hash(source):
        log(f"{os.path.relpath(out, ROOT)}: up to date")
        return manifest
    log(f"{os.path.relpath(out, ROOT)}: exporting {os.path.relpath(source, ROOT)}")
    module.main([source, out])
    return read_json(os.path.join(out, "manifest.json"))


def goldens(source, exported, path):
    import torch
    from transformers import VitsModel, VitsTokenizer

    tokenizer = VitsTokenizer.from_pretrained(source)
    model = VitsModel.from_pretrained(source).eval()
    calls = []
    for text, seed, options in CALLS:
        model.noise_scale = options.get("noiseScale", model.config.noise_scale)
        model.noise_scale_duration = options.get("noiseScaleDuration", model.config.noise_scale_duration)
        inputs = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            torch.manual_seed(seed)
            out = model(**inputs, speaking_rate=options.get("speakingRate", model.config.speaking_rate))
        n = int(out.sequence_lengths[0])
        wave = out.waveform[0, :n].contiguous().numpy().astype("<f4")
        calls.append({"text": text, "seed": seed, "options": options, "samples": n,
                      "waveform": base64.b64encode(wave.tobytes()).decode()})
        log(f"golden {text!r} seed {seed} {options}: {n} samples")
    tokens = [{"text": t, "ids": tokenizer(t)["input_ids"]} for t in TOKENIZE]
    # The same characters without normalize: nothing lower-cased or dropped, "<unk>" a token of its own.
    raw = VitsTokenizer.from_pretrained(source, normalize=False)
    tokens_raw = [{"text": t, "ids": raw(t)["input_ids"]} for t in TOKENIZE]
    plain = VitsTokenizer.from_pretrained(source, add_blank=False)  # no blank between characters
    tokens_plain = [{"text": t, "ids": plain(t)["input_ids"]} for t in TOKENIZE]
    write_json(path, {"export": exported["source"]["hash"], "samplingRate": model.config.sampling_rate,
                      "tokenize": tokens, "tokenizeRaw": tokens_raw, "tokenizeNoBlank": tokens_plain,
                      "calls": calls}, indent=None)


def main():
    p = argparse.ArgumentParser(prog=PROG)
    p.add_argument("--out", default=os.path.join(HERE, "golden", "tts"))
    args = p.parse_args()
    lacking = missing(["torch", "transformers"])
    if lacking:
        raise SystemExit(f"{PROG}: missing Python packages: {', '.join(lacking)}")
    import torch

    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    source, out = os.path.join(args.out, "vits-src"), os.path.join(args.out, "vits")
    make_source(source)
    manifest = export_tts(source, out)
    path = os.path.join(args.out, "goldens.json")
    if up_to_date(log, path, {"export": manifest["source"]["hash"], "calls_v": 4}):
        return
    goldens(source, manifest, path)
    have = read_json(path)
    have["calls_v"] = 4
    write_json(path, have)


if __name__ == "__main__":
    main()
