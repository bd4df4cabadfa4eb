#!/usr/bin/env python3
"""Turns a Hugging Face VITS checkpoint (VitsModel: Facebook's MMS-TTS) into a torch-node folder for
torch-node's text-to-speech pipeline.

    python export_tts.py MODEL_DIR OUT_DIR [--format auto|torchscript]

VITS's output length is the sum of durations it predicts, so the model is cut where shapes become
data-dependent and joined again in one scripted program:

  encode     traced: input_ids [1, T], duration noise [1, 2, T] -> log durations [1, 1, T], prior
             means and log variances [1, T, flow_size] (the text encoder, and the stochastic
             duration predictor's reverse flows run on the noise given, not on one drawn);
  decode     traced: prior latents [1, flow_size, frames] -> waveform [1, frames × hop] (the
             reverse flow and the HiFi-GAN decoder: convolutions, any number of frames);
  model.pt   scripted around the two: a torch.Generator seeded with `seed` draws the duration noise
             (randn [1, 2, T]) and then the prior noise (randn [1, frames, flow_size], transposed, the
             layout randn_like gives the transposed means), in VitsModel.forward's order, so the
             waveform is transformers' VitsModel(input_ids) after torch.manual_seed(seed). Between
             the two, the durations (ceil(exp(log_duration) / speaking_rate)) expand the priors as
             VitsModel does; past `max_frames` frames it stops and answers an empty waveform with the
             length it would have had.
             forward(input_ids int64 [1, T], seed int, noise_scale float, noise_scale_duration float,
             speaking_rate float, max_frames int) -> (waveform float32 [1, samples], samples int64 [1]);
  vocab.json the tokenizer's characters (VitsTokenizer, reproduced in lib/audio/text-to-speech.js);
  manifest.json  kind 'text-to-speech': samplingRate, hop (samples a frame), the config's noise
             scales and speaking rate, the tokenizer's settings.

Every piece is checked against the eager model: encode and decode at several lengths within 1e-4,
model.pt against VitsModel(**tokenizer(text)) after torch.manual_seed at three seeds and texts.
Refused (exit 2): checkpoints whose tokenizer phonemizes (espeak, not built), multi-speaker ones.

Exit status: 0 written; 1 the export failed; 2 bad arguments or an unsupported model; 3 torch or
transformers is missing. Every failure is one line on stderr.
"""

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import Unsupported, log, read_config, run, staged_folder, with_script, write_manifest  # noqa: E402
from export_text import source_hash  # noqa: E402

FORMAT_VERSION = 1
PROG = "export_tts.py"
FILES = ("model.pt", "vocab.json", "manifest.json")
TOLERANCE = 1e-4
CHECK_TEXTS = ("hello world", "a", "the quick brown fox jumps over the lazy dog, twice over")


def tts_hash(model_dir):
    """The folder and this script: the fixture script skips an unchanged export."""
    options = argparse.Namespace(dtype="float32", format="torchscript", max_batch=1)
    return with_script(source_hash(model_dir, options), __file__)


def trace_friendly_relative_embeddings(self, relative_embeddings, length):
    """VitsAttention._get_relative_embeddings without Python's max() over the length (a trace would
    keep the traced length's branch): pads by `length` on both sides, always, and slices the same
    2 × length - 1 rows (the padding is zeros either way)."""
    import torch

    padded = torch.nn.functional.pad(relative_embeddings, [0, 0, length, length, 0, 0])
    start = self.window_size + 1
    return padded[:, start:start + 2 * length - 1]


def Encode(torch, model):
    class Encode(torch.nn.Module):
        """Text encoder and duration predictor of one unpadded text, the duration noise given."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, duration_noise):
            m = self.model
            mask = torch.ones_like(input_ids).unsqueeze(-1).to(torch.float32)
            out = m.text_encoder(input_ids=input_ids, padding_mask=mask, return_dict=True)
            hidden = out.last_hidden_state.transpose(1, 2)
            mask = mask.transpose(1, 2)
            if m.config.use_stochastic_duration_prediction:
                dp = m.duration_predictor
                inputs = dp.conv_pre(hidden)
                inputs = dp.conv_dds(inputs, mask)
                inputs = dp.conv_proj(inputs) * mask
                flows = list(reversed(dp.flows))
                flows = flows[:-2] + [flows[-1]]  # as VitsStochasticDurationPredictor: one vflow fewer
                latents = duration_noise
                for flow in flows:
                    latents = torch.flip(latents, [1])
                    latents, _ = flow(latents, mask, global_conditioning=inputs, reverse=True)
                log_duration, _ = torch.split(latents, [1, 1], dim=1)
            else:
                log_duration = m.duration_predictor(hidden, mask, None)
            return log_duration, out.prior_means, out.prior_log_variances

    return Encode()


def Decode(torch, model):
    class Decode(torch.nn.Module):
        """Reverse flow and HiFi-GAN over the expanded prior latents of one text."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, prior_latents):
            mask = torch.ones_like(prior_latents[:, :1, :])
            latents = self.model.flow(prior_latents, mask, None, reverse=True)
            return self.model.decoder(latents * mask, None).squeeze(1)

    return Decode()


def Synthesize(torch, encode, decode, stochastic, hop):
    class Synthesize(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encode = encode
            self.decode = decode
            self.stochastic = stochastic
            self.hop = hop

        def forward(self, input_ids: torch.Tensor, seed: int, noise_scale: float, noise_scale_duration: float,
                    speaking_rate: float, max_frames: int):
            g = torch.Generator()
            g.manual_seed(seed)
            length = input_ids.size(1)
            # VitsModel draws the duration noise only with the stochastic duration predictor.
            if self.stochastic:
                duration_noise = torch.randn([1, 2, length], generator=g) * noise_scale_duration
            else:
                duration_noise = torch.zeros([1, 2, length])
            log_duration, prior_means, prior_log_variances = self.encode(input_ids, duration_noise)
            duration = torch.ceil(torch.exp(log_duration) * (1.0 / speaking_rate))
            frames = torch.clamp_min(torch.sum(duration, [1, 2]), 1).long()
            count = int(frames.max())
            if count > max_frames:
                return torch.zeros([1, 0]), frames * self.hop
            # VitsModel's alignment: frame j belongs to the token whose cumulative duration first passes j.
            cumulative = torch.cumsum(duration, -1).view(length, 1)
            indices = torch.arange(count, dtype=duration.dtype)
            valid = (indices.unsqueeze(0) < cumulative).to(torch.float32)
            path = valid - torch.nn.functional.pad(valid, [0, 0, 1, 0])[:-1]
            attn = path.transpose(0, 1).unsqueeze(0)  # [1, frames, T]
            means = torch.matmul(attn, prior_means).transpose(1, 2)
            log_variances = torch.matmul(attn, prior_log_variances).transpose(1, 2)
            # randn_like(means): the transposed means' strides, filled element by element in memory
            # order (libtorch's normal_ on a non-contiguous tensor), not randn's vectorized fill.
            noise = torch.empty([1, count, means.size(1)]).transpose(1, 2).normal_(0.0, 1.0, generator=g)
            latents = means + noise * torch.exp(log_variances) * noise_scale
            return self.decode(latents), frames * self.hop

    return torch.jit.script(Synthesize())


def tokenizer_settings(model_dir):
    """The VitsTokenizer's settings (tokenizer_config.json), Unsupported for what is not built."""
    path = os.path.join(model_dir, "tokenizer_config.json")
    config = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    if config.get("phonemize", True) and config.get("tokenizer_class", "VitsTokenizer") == "VitsTokenizer":
        raise Unsupported(f"{model_dir}: the tokenizer phonemizes (phonemize true: espeak), which torch-node does "
                          "not do; MMS-TTS checkpoints (phonemize false) are supported")
    if not os.path.exists(os.path.join(model_dir, "vocab.json")):
        raise Unsupported(f"{model_dir}: no vocab.json (a VitsTokenizer's characters)")
    return config


def export_tts(args):
    import numpy as np
    import torch
    from transformers import VitsModel, VitsTokenizer
    from transformers.models.vits import modeling_vits

    config = read_config(args.model_dir)
    if "VitsModel" not in (config.get("architectures") or []) and config.get("model_type") != "vits":
        raise Unsupported(f"{args.model_dir}: architectures {config.get('architectures')}: expected VitsModel")
    if config.get("num_speakers", 1) > 1:
        raise Unsupported(f"{args.model_dir}: {config['num_speakers']} speakers; multi-speaker VITS is not built")
    settings = tokenizer_settings(args.model_dir)
    torch.manual_seed(0)
    tokenizer = VitsTokenizer.from_pretrained(args.model_dir)
    model = VitsModel.from_pretrained(args.model_dir).eval()
    original = modeling_vits.VitsAttention._get_relative_embeddings
    hop = int(np.prod(model.config.upsample_rates))
    stochastic = bool(model.config.use_stochastic_duration_prediction)
    encode, decode = Encode(torch, model), Decode(torch, model)
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        ids = torch.randint(1, model.config.vocab_size, (1, 11), generator=gen)
        modeling_vits.VitsAttention._get_relative_embeddings = trace_friendly_relative_embeddings
        try:
            encode_t = torch.jit.trace(encode, (ids, torch.randn(1, 2, 11, generator=gen)), check_trace=False)
        finally:  # the checks below compare with transformers' own code
            modeling_vits.VitsAttention._get_relative_embeddings = original
        decode_t = torch.jit.trace(decode, (torch.randn(1, model.config.flow_size, 9, generator=gen),),
                                   check_trace=False)
        for n in (1, 3, 7, 40):  # shorter and longer than the relative-attention window, and the trace
            x, noise = torch.randint(1, model.config.vocab_size, (1, n), generator=gen), torch.randn(1, 2, n)
            compare(f"encode at {n} tokens", encode_t(x, noise), encode(x, noise))
        for n in (1, 5, 30):
            z = torch.randn(1, model.config.flow_size, n, generator=gen)
            compare(f"decode at {n} frames", decode_t(z), decode(z))
        program = Synthesize(torch, encode_t, decode_t, stochastic, hop)
    with staged_folder(args.out_dir, FILES) as tmp:
        path = os.path.join(tmp, "model.pt")
        program.save(path)
        loaded = torch.jit.load(path)
        check_program(torch, model, tokenizer, loaded)
        shutil.copyfile(os.path.join(args.model_dir, "vocab.json"), os.path.join(tmp, "vocab.json"))
        c = model.config
        # PreTrainedTokenizer.tokenize splits the text at every added token (the pad "_" too: alone,
        # it is one id without blanks around it)
        special = list(tokenizer.added_tokens_encoder)
        write_manifest(tmp, {
            "format": "torch-node/tts-model",
            "version": FORMAT_VERSION,
            "kind": "text-to-speech",
            "architecture": "VitsModel",
            "program": "model.pt",
            "samplingRate": c.sampling_rate,
            "hop": hop,
            "noiseScale": c.noise_scale,
            "noiseScaleDuration": c.noise_scale_duration,
            "speakingRate": c.speaking_rate,
            "stochasticDuration": stochastic,
            "tokenizer": {
                "vocab": "vocab.json",
                "addBlank": bool(settings.get("add_blank", True)),
                "normalize": bool(settings.get("normalize", True)),
                "isUroman": bool(settings.get("is_uroman", False)),
                "language": settings.get("language"),
                "unkId": tokenizer.unk_token_id,
                "splitTokens": {t: tokenizer.added_tokens_encoder[t] for t in special},
                # normalize_text's words in its order (the first that matches wins; JSON objects put
                # integer-like keys first in JS, so the order is written out)
                "words": list(tokenizer.encoder.keys()) + list(tokenizer.added_tokens_encoder.keys()),
            },
            "source": {"hash": tts_hash(args.model_dir), "checked": TOLERANCE},
        })
    log(f"{PROG}: wrote {args.out_dir} ({hop} samples a frame, {c.sampling_rate} Hz)")


def compare(what, got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            raise RuntimeError(f"{what}: shape {tuple(g.shape)}, the eager model's {tuple(w.shape)}")
        diff = (g - w).abs().max().item() if g.numel() else 0.0
        if not diff <= TOLERANCE:
            raise RuntimeError(f"{what}: differs from the eager model by {diff:.3g} (tolerance {TOLERANCE})")
        worst = max(worst, diff)
    return worst


def check_program(torch, model, tokenizer, program):
    """model.pt against VitsModel(**tokenizer(text)) after torch.manual_seed(seed)."""
    c = model.config
    for seed, text in zip((0, 555, 2**40 + 3), CHECK_TEXTS):
        inputs = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            torch.manual_seed(seed)
            want = model(**inputs)
            wave, samples = program(inputs["input_ids"], seed, c.noise_scale, c.noise_scale_duration,
                                    c.speaking_rate, 1 << 30)
        if int(samples[0]) != int(want.sequence_lengths[0]):
            raise RuntimeError(f"model.pt: {int(samples[0])} samples for {text!r}, the eager model's "
                               f"{int(want.sequence_lengths[0])}")
        diff = compare(f"model.pt on {text!r} (seed {seed})", wave, want.waveform)
        log(f"{PROG}: {text!r} seed {seed}: {int(samples[0])} samples as VitsModel's, waveform within {diff:.2g}")


def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description="Export a VITS (MMS-TTS) checkpoint for torch-node.")
    p.add_argument("model_dir", help="a Hugging Face VitsModel folder (config.json, model.safetensors, vocab.json)")
    p.add_argument("out_dir", help="the torch-node model folder to write")
    p.add_argument("--format", choices=("auto", "torchscript"), default="auto",
                   help="auto: TorchScript, the one format VITS exports as (its scripted program draws the noise)")
    args = p.parse_args(argv)
    args.max_batch = 2  # export_common.run's check; VITS runs one text a call
    run(PROG, args, lambda: export_tts(args))


if __name__ == "__main__":
    main()
