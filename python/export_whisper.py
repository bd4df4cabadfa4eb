#!/usr/bin/env python3
"""Export a Whisper checkpoint (WhisperForConditionalGeneration) to a torch-node speech folder.

Usage: python export_whisper.py MODEL_DIR OUT_DIR [--format torchscript]

Writes two TorchScript programs, traced from the checkpoint's own modules and checked against the
eager model (logits within 1e-4):

  encoder.pt   input_features float32 [batch, n_mels, 3000] ->
               (cross_k, cross_v) float32 [layers, batch, heads, 1500, head_dim]: the encoder's
               hidden states through every decoder layer's cross-attention k_proj / v_proj, once
  decoder.pt   (input_ids int64 [batch, T], position_ids int64 [batch, T], mask float32 [T, P + T]
               (0 where a token may attend, -inf where not), self_k, self_v float32
               [layers, batch, heads, P, head_dim], cross_k, cross_v) ->
               (logits float32 [batch, T, vocab], self_k, self_v [layers, batch, heads, P + T, head_dim])

and manifest.json (task automatic-speech-recognition, the special tokens, suppress_tokens and
begin_suppress_tokens from generation_config.json, the feature extractor's settings), the tokenizer.
Exit statuses as the other export scripts (export_common.run).
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import Unsupported, log, parser, read_config, run, staged_folder, trace, write_manifest  # noqa: E402

PROG = "export_whisper.py"
FORMAT_VERSION = 1
FILES = ("encoder.pt", "decoder.pt", "manifest.json", "tokenizer.json", "tokenizer_config.json")


def whisper_hash(model_dir, args):
    """What the export is made from: the folder's files (names, sizes, contents of the small ones),
    the options and this script."""
    import hashlib

    h = hashlib.sha256(json.dumps([FORMAT_VERSION, args.format]).encode())
    with open(__file__, "rb") as f:
        h.update(f.read())
    for name in sorted(os.listdir(model_dir)):
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            h.update(name.encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def programs(torch, model):
    """The encoder and the decoder step as modules over the checkpoint's own layers. The decoder step
    is Whisper's decoder layer written over explicit cache tensors (transformers' cache classes do
    not trace): pre-norm self-attention (q scaled by head_dim ** -0.5 before q @ k, as
    WhisperAttention), cross-attention over the precomputed K/V, the MLP, the final norm, proj_out."""
    decoder = model.model.decoder
    layers = decoder.layers
    heads = layers[0].self_attn.num_heads
    head_dim = layers[0].self_attn.head_dim
    scaling = float(layers[0].self_attn.scaling)
    embed_scale = float(getattr(decoder, "embed_scale", 1.0))

    def split(x):  # [B, T, H * D] -> [B, H, T, D]
        return x.unflatten(-1, (heads, head_dim)).transpose(1, 2)

    def attend(q, k, v, mask=None):
        scores = torch.matmul(q, k.transpose(2, 3))
        if mask is not None:
            scores = scores + mask
        return torch.matmul(scores.softmax(-1), v).transpose(1, 2).flatten(2)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = model.model.encoder
            self.layers = layers

        def forward(self, input_features):
            hidden = self.encoder(input_features).last_hidden_state
            ks = [split(layer.encoder_attn.k_proj(hidden)) for layer in self.layers]
            vs = [split(layer.encoder_attn.v_proj(hidden)) for layer in self.layers]
            return torch.stack(ks), torch.stack(vs)

    class DecoderStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = decoder
            self.proj_out = model.proj_out

        def forward(self, input_ids, position_ids, mask, self_k, self_v, cross_k, cross_v):
            x = self.decoder.embed_tokens(input_ids) * embed_scale + self.decoder.embed_positions.weight[position_ids]
            new_k, new_v = [], []
            for i, layer in enumerate(self.decoder.layers):
                h = layer.self_attn_layer_norm(x)
                a = layer.self_attn
                k = torch.cat([self_k[i], split(a.k_proj(h))], dim=2)
                v = torch.cat([self_v[i], split(a.v_proj(h))], dim=2)
                new_k.append(k)
                new_v.append(v)
                x = x + a.out_proj(attend(split(a.q_proj(h) * scaling), k, v, mask))
                h = layer.encoder_attn_layer_norm(x)
                c = layer.encoder_attn
                x = x + c.out_proj(attend(split(c.q_proj(h) * scaling), cross_k[i], cross_v[i]))
                h = layer.final_layer_norm(x)
                x = x + layer.fc2(layer.activation_fn(layer.fc1(h)))
            logits = self.proj_out(self.decoder.layer_norm(x))
            return logits, torch.stack(new_k), torch.stack(new_v)

    return Encoder().eval(), DecoderStep().eval(), heads, head_dim


def causal_mask(torch, past, new):
    """[new, past + new]: 0 where query i may see key j (j <= past + i), -inf elsewhere."""
    j = torch.arange(past + new)
    i = torch.arange(new).unsqueeze(1)
    return torch.zeros(new, past + new).masked_fill(j > past + i, float("-inf"))


def check(torch, model, encoder, step, features, prompt):
    """The largest |difference| of the programs' logits from the eager model's, over a prompt fed at
    once and then token by token."""
    with torch.no_grad():
        want = model(input_features=features, decoder_input_ids=prompt).logits
        ck, cv = encoder(features)
        layers, batch, heads, _, dim = ck.shape
        empty = torch.zeros(layers, batch, heads, 0, dim)
        n = prompt.shape[1]
        positions = torch.arange(n).expand(batch, n)
        logits, _, _ = step(prompt, positions, causal_mask(torch, 0, n), empty, empty, ck, cv)
        diff = (logits - want).abs().max().item()
        k, v = empty, empty
        for t in range(n):
            ids = prompt[:, t:t + 1]
            logits, k, v = step(ids, torch.full((batch, 1), t), causal_mask(torch, t, 1), k, v, ck, cv)
            diff = max(diff, (logits[:, 0] - want[:, t]).abs().max().item())
    return diff


def export(args):
    import torch
    import transformers
    from transformers import AutoFeatureExtractor, AutoTokenizer, GenerationConfig, WhisperForConditionalGeneration
    from transformers.models.whisper.tokenization_whisper import TO_LANGUAGE_CODE

    started = time.monotonic()
    config = read_config(args.model_dir)
    if config.get("model_type") != "whisper":
        raise Unsupported(f"{args.model_dir}: model_type {config.get('model_type')!r} is not whisper")
    log(f"loading {args.model_dir}")
    model = WhisperForConditionalGeneration.from_pretrained(args.model_dir, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    extractor = AutoFeatureExtractor.from_pretrained(args.model_dir)
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    gen = GenerationConfig.from_pretrained(args.model_dir)
    encoder, step, heads, head_dim = programs(torch, model)

    g = torch.Generator().manual_seed(0)
    n_mels, frames = int(extractor.feature_size), int(extractor.nb_max_frames)
    features = torch.randn(2, n_mels, frames, generator=g)
    vocab = int(model.config.vocab_size)
    prompt = torch.randint(0, vocab, (2, 5), generator=g)
    with staged_folder(args.out_dir, FILES) as tmp, torch.no_grad():
        log("torch.jit.trace: the encoder")
        enc = trace(torch, encoder, (features,), os.path.join(tmp, "encoder.pt"))
        ck, cv = encoder(features)
        layers = ck.shape[0]
        past = torch.randn(layers, 2, heads, 3, head_dim, generator=g)
        example = (prompt[:, :2], torch.tensor([[3, 4], [3, 4]]), causal_mask(torch, 3, 2), past, past, ck, cv)
        log("torch.jit.trace: the decoder step")
        dec = trace(torch, step, example, os.path.join(tmp, "decoder.pt"))
        diff = check(torch, model, enc, dec, features, prompt)
        if not diff <= 1e-4:
            raise RuntimeError(f"the exported programs differ from the eager model by {diff:.3g} (> 1e-4)")
        log(f"checked against the eager model: max abs diff {diff:.3g}")
        tokenizer.save_pretrained(tmp)
        for name in os.listdir(tmp):
            if name not in FILES:
                os.remove(os.path.join(tmp, name))
        if not os.path.exists(os.path.join(tmp, "tokenizer.json")):
            raise Unsupported("the tokenizer has no tokenizer.json (a tokenizers-backed tokenizer is needed)")
        lang_to_id = dict(getattr(gen, "lang_to_id", None) or {})
        task_to_id = dict(getattr(gen, "task_to_id", None) or {})
        no_timestamps = getattr(gen, "no_timestamps_token_id", None)
        manifest = {
            "format": "torch-node/speech-model",
            "formatVersion": FORMAT_VERSION,
            "task": "automatic-speech-recognition",
            "kind": "whisper",
            "encoder": {"program": "encoder.pt", "programFormat": "torchscript"},
            "decoder": {"program": "decoder.pt", "programFormat": "torchscript"},
            "layers": int(layers),
            "heads": int(heads),
            "headDim": int(head_dim),
            "vocabSize": vocab,
            "maxTargetPositions": int(model.config.max_target_positions),
            # The encoder's positions: a timestamp step is chunk_length / maxSourcePositions seconds.
            "maxSourcePositions": int(model.config.max_source_positions),
            "features": {
                "nMels": n_mels,
                "nFft": int(extractor.n_fft),
                "hopLength": int(extractor.hop_length),
                "samplingRate": int(extractor.sampling_rate),
                "nSamples": int(extractor.n_samples),
            },
            "tokens": {
                "decoderStart": int(gen.decoder_start_token_id),
                "eos": int(gen.eos_token_id if not isinstance(gen.eos_token_id, list) else gen.eos_token_id[0]),
                "noTimestamps": None if no_timestamps is None else int(no_timestamps),
                "timestampBegin": None if no_timestamps is None else int(no_timestamps) + 1,
                "langToId": lang_to_id,
                "taskToId": task_to_id,
            },
            # transformers' names and codes for the languages ('english' -> 'en'), for `language`.
            "languageNames": dict(TO_LANGUAGE_CODE),
            "isMultilingual": bool(getattr(gen, "is_multilingual", bool(lang_to_id))),
            "suppressTokens": list(gen.suppress_tokens or []),
            "beginSuppressTokens": list(gen.begin_suppress_tokens or []),
            "forcedDecoderIds": getattr(gen, "forced_decoder_ids", None),
            "maxLength": int(gen.max_length or 448),
            "numBeams": int(gen.num_beams or 1),
            # WhisperTimeStampLogitsProcessor's bound on the first timestamp (None: no bound).
            "maxInitialTimestampIndex": getattr(gen, "max_initial_timestamp_index", None),
            "tokenizer": "tokenizer.json",
            "dtype": "float32",
            "source": {"modelType": "whisper", "hash": whisper_hash(args.model_dir, args)},
            "exportedWith": {"torch": torch.__version__, "transformers": transformers.__version__},
            "checkedMaxAbsDiff": diff,
        }
        write_manifest(tmp, manifest)
    log(f"wrote {args.out_dir} (TorchScript, {n_mels} mels) in {time.monotonic() - started:.0f} s")


def main(argv):
    args = parser(PROG, "Export a Whisper checkpoint to a torch-node speech folder.",
                  "a Hugging Face WhisperForConditionalGeneration folder", max_batch=16).parse_args(argv)
    if args.format == "pt2":
        from export_common import fail
        fail(PROG, 2, "--format pt2: this slice exports TorchScript only (the decoder step's cache grows each call)")
    args.format = "torchscript"
    run(PROG, args, lambda: export(args))


if __name__ == "__main__":
    main(sys.argv[1:])
