#!/usr/bin/env python3
"""A random-weight Whisper folder, its export and transformers goldens for the speech tests.

Usage (from the repository root):

    .libtorch/bin/python models/make_whisper_models.py [--out models/golden/whisper]

Writes (generated, under models/golden/, which git ignores), seeded (0):

  whisper/tokenizer/     a byte-level BPE trained here on a fixed text (no Whisper tokenizer ships
                         in a registry package), with Whisper's special tokens in Whisper's order:
                         <|endoftext|>, <|startoftranscript|>, the 99 language tokens, <|translate|>,
                         <|transcribe|>, <|startoflm|>, <|startofprev|>, <|nospeech|>,
                         <|notimestamps|>, then the 1501 timestamps <|0.00|> .. <|30.00|>
  whisper/src/           WhisperForConditionalGeneration (2+2 layers, 64 wide, 80 mels),
                         WhisperFeatureExtractor, generation_config.json (lang_to_id, task_to_id,
                         suppress_tokens, begin_suppress_tokens, no_timestamps_token_id)
  whisper/model/         that folder exported by python/export_whisper.py
  whisper/speech.wav     models/fixtures/audio's signal as 16-bit PCM at 16 kHz (the FLAC, MP3 and
                         Ogg/Vorbis copies are committed there: no encoder ships with this Python)
  whisper/speech44k.wav  the same signal at 44.1 kHz, stereo (the resampling test)
  whisper/speech.features.f32   WhisperFeatureExtractor(speech.wav) [80, 3000] float32
  whisper/goldens.json   WhisperForConditionalGeneration.generate on speech.wav: greedy tokens and
                         text for several language / task settings, the detected language
  whisper/ts-src/        a second size (96 wide, 1+3 layers, 96 positions) whose generation_config
                         lets timestamps through, the timestamp tokens' embeddings scaled so text
                         and timestamps both win steps; whisper/ts-model/ its export
  whisper/long.wav       a 40 s signal (speech_like pieces of several lengths, one after another)
  whisper/timestamps.json  transformers' pipeline("automatic-speech-recognition") on ts-model:
                         return_timestamps on speech.wav (one window, the seek loop within it),
                         on long.wav sequentially (long-form) and chunked (chunk_length_s 15, with
                         and without timestamps): text, chunks and generate's tokens
  whisper/segments.json  WhisperForConditionalGeneration.generate(return_timestamps=True,
                         return_segments=True) on ts-model with the fallback's thresholds, each
                         window's passes as _need_fallback saw them: seek, temperature, tokens,
                         avg_logprob (_retrieve_avg_logprobs), the token and text compression ratios,
                         no_speech_prob (WhisperNoSpeechDetection), the verdict
  whisper/beams.json     beam search: WhisperForConditionalGeneration.generate(num_beams=N) on model
                         (length_penalty, early_stopping varied: sequences, sequences_scores, text)
                         and on ts-model with timestamps (one window and 40 s long-form: each
                         window's tokens, sequences_scores and avg_logprob as _need_fallback saw
                         them), and the pipeline's own default (5 beams: this checkpoint's
                         generation config leaves num_beams at 1) with timestamps

`--audio-fixtures` rewrites models/fixtures/audio/speech.{flac,mp3,ogg} (needs `soundfile`).
"""

import argparse
import os
import sys
import wave

from fixture_common import HERE, ROOT, exporter, logger, read_json, up_to_date, write_json
from fixture_common import export as export_folder

PROG = "make_whisper_models.py"
log = logger(PROG)
RATE = 16000
LANGS = None  # transformers' LANGUAGES, in Whisper's token order (filled on use)
CORPUS = ["the quick brown fox jumps over the lazy dog", "speech to text with whisper, from the checkpoint",
          "un deux trois quatre cinq", "hello world, how are you today?"]
CASES = [
    {"language": "en", "task": "transcribe"},
    {"language": "fr", "task": "translate"},
    {"language": "german", "task": None},
    {"language": None, "task": None},
    {"language": None, "task": "transcribe"},
]
MAX_NEW_TOKENS = 12


def speech_like(rate=RATE, seconds=1.5):
    """A deterministic 1.5 s test signal: two gliding tones under an envelope and a little noise,
    quantized to 16 bits (what a WAV holds)."""
    import numpy as np

    t = np.arange(int(rate * seconds)) / rate
    env = 0.5 * (1 - np.cos(2 * np.pi * t / seconds))
    x = 0.3 * np.sin(2 * np.pi * (220 * t + 150 * t * t)) + 0.15 * np.sin(2 * np.pi * 1300 * t) * env
    x += 0.01 * np.random.RandomState(0).randn(t.size)
    return (np.round(x * 32767) / 32768).astype(np.float32)


def write_wav(path, x, rate, channels=1):
    import numpy as np

    data = np.repeat((np.asarray(x) * 32768).round().clip(-32768, 32767).astype("<i2")[:, None], channels, 1)
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data.tobytes())


def make_tokenizer(folder):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    if os.path.isfile(os.path.join(folder, "tokenizer.json")):
        return
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    specials = (["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{code}|>" for code in LANGUAGES]
                + ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
                   "<|notimestamps|>"])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.add_tokens([AddedToken(f"<|{i * 0.02:.2f}|>", normalized=False) for i in range(1501)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    os.makedirs(folder, exist_ok=True)
    fast.save_pretrained(folder)


def make_source(folder, tokenizer_dir):
    import torch
    from transformers import (AutoTokenizer, GenerationConfig, WhisperConfig, WhisperFeatureExtractor,
                              WhisperForConditionalGeneration)
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    marker = os.path.join(folder, "make_whisper_models.json")
    recipe = {"seed": 0, "v": 2}
    if read_json(marker) == recipe:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight Whisper model")
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = lambda s: tok.convert_tokens_to_ids(s)  # noqa: E731
    eos, sot = ids("<|endoftext|>"), ids("<|startoftranscript|>")
    config = WhisperConfig(vocab_size=len(tok), num_mel_bins=80, d_model=64, encoder_layers=2, decoder_layers=2,
                           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                           decoder_ffn_dim=128, max_source_positions=1500, max_target_positions=64,
                           decoder_start_token_id=sot, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
                           init_std=0.2)
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config).eval()
    model.save_pretrained(folder)
    WhisperFeatureExtractor(feature_size=80).save_pretrained(folder)
    for name in os.listdir(tokenizer_dir):
        with open(os.path.join(tokenizer_dir, name), "rb") as src, open(os.path.join(folder, name), "wb") as dst:
            dst.write(src.read())
    gen = GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos, max_length=64,
        is_multilingual=True, no_timestamps_token_id=ids("<|notimestamps|>"),
        lang_to_id={f"<|{c}|>": ids(f"<|{c}|>") for c in LANGUAGES},
        task_to_id={"translate": ids("<|translate|>"), "transcribe": ids("<|transcribe|>")},
        # The timestamps too: a random model emits them even after <|notimestamps|>, and transformers
        # then splits the output into segments and decodes again from the last timestamp (its
        # long-form seek), which this slice does not do (docs/speech.md).
        suppress_tokens=[3, 5, 8, 13, 21, 34, 55] + list(range(ids("<|0.00|>"), len(tok))),
        begin_suppress_tokens=[ids("Ġ"), eos],
    )
    gen.save_pretrained(folder)
    write_json(marker, recipe)


def goldens(src, out_dir, wav_path, manifest):
    import numpy as np
    import torch
    from transformers import AutoFeatureExtractor, AutoTokenizer, WhisperForConditionalGeneration

    path = os.path.join(out_dir, "goldens.json")
    stamp = {"exportHash": manifest["source"]["hash"], "v": 1}
    if up_to_date(log, path, stamp) and os.path.exists(os.path.join(out_dir, "speech.features.f32")):
        return
    extractor = AutoFeatureExtractor.from_pretrained(src)
    tok = AutoTokenizer.from_pretrained(src)
    model = WhisperForConditionalGeneration.from_pretrained(src).eval()
    with wave.open(wav_path) as w:
        audio = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
    features = extractor(audio, sampling_rate=RATE, return_tensors="pt").input_features
    features[0].numpy().astype("<f4").tofile(os.path.join(out_dir, "speech.features.f32"))
    timestamp_begin = manifest["tokens"]["timestampBegin"]
    cases = []
    for case in CASES:
        with torch.no_grad():
            out = model.generate(features, language=case["language"], task=case["task"],
                                 max_new_tokens=MAX_NEW_TOKENS, return_dict_in_generate=True, output_scores=True)
        sequence = out.sequences[0].tolist()
        gap = min(float((s[0].topk(2).values[0] - s[0].topk(2).values[1]).item()) for s in out.scores)
        text_ids = [t for t in sequence if t < timestamp_begin]
        cases.append(dict(case, sequence=sequence, text=tok.decode(text_ids, skip_special_tokens=True),
                          smallestTop2Gap=gap))
        log(f"{case}: {sequence} (top-2 gap >= {gap:.3g})")
    write_json(path, dict(stamp, maxNewTokens=MAX_NEW_TOKENS, cases=cases,
                          featuresShape=list(features.shape[1:])))


TS_MAX_NEW_TOKENS = 16
TS_CHUNK_S = 15
LONG_PIECES = (7.0, 11.0, 5.0, 9.0, 8.0)  # 40 s


def make_ts_source(folder, tokenizer_dir):
    """The second config: timestamps generated (not suppressed); the other special tokens suppressed."""
    import torch
    from transformers import (AutoTokenizer, GenerationConfig, WhisperConfig, WhisperFeatureExtractor,
                              WhisperForConditionalGeneration)
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    marker = os.path.join(folder, "make_whisper_models.json")
    recipe = {"seed": 1, "v": 1, "scale": 0.3}
    if read_json(marker) == recipe:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight Whisper model with timestamps")
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = lambda s: tok.convert_tokens_to_ids(s)  # noqa: E731
    eos, sot, nt = ids("<|endoftext|>"), ids("<|startoftranscript|>"), ids("<|notimestamps|>")
    config = WhisperConfig(vocab_size=len(tok), num_mel_bins=80, d_model=96, encoder_layers=1, decoder_layers=3,
                           encoder_attention_heads=6, decoder_attention_heads=6, encoder_ffn_dim=192,
                           decoder_ffn_dim=192, max_source_positions=1500, max_target_positions=96,
                           decoder_start_token_id=sot, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
                           init_std=0.2)
    torch.manual_seed(recipe["seed"])
    model = WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():
        # 1501 timestamps against ~300 text tokens: their total wins every step unless damped.
        model.model.decoder.embed_tokens.weight[nt + 1:] *= recipe["scale"]
    model.save_pretrained(folder)
    WhisperFeatureExtractor(feature_size=80).save_pretrained(folder)
    for name in os.listdir(tokenizer_dir):
        with open(os.path.join(tokenizer_dir, name), "rb") as src, open(os.path.join(folder, name), "wb") as dst:
            dst.write(src.read())
    GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos, max_length=96,
        is_multilingual=True, no_timestamps_token_id=nt,
        lang_to_id={f"<|{c}|>": ids(f"<|{c}|>") for c in LANGUAGES},
        task_to_id={"translate": ids("<|translate|>"), "transcribe": ids("<|transcribe|>")},
        suppress_tokens=[3, 5, 8] + list(range(sot, nt)),
        begin_suppress_tokens=[ids("Ġ"), eos],
    ).save_pretrained(folder)
    write_json(marker, recipe)


def timestamp_goldens(src, out_dir, manifest):
    import numpy as np
    import torch
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperTokenizer, pipeline

    path = os.path.join(out_dir, "timestamps.json")
    stamp = {"exportHash": manifest["source"]["hash"], "v": 2}
    if up_to_date(log, path, stamp):
        return
    model = WhisperForConditionalGeneration.from_pretrained(src).eval()
    extractor = WhisperFeatureExtractor.from_pretrained(src)
    asr = pipeline("automatic-speech-recognition", model=model, tokenizer=WhisperTokenizer.from_pretrained(src),
                   feature_extractor=extractor)
    short = speech_like()
    long = np.concatenate([speech_like(seconds=s) for s in LONG_PIECES])
    # num_beams=1: the pipeline would use 5 beams; torch-node decodes greedily (docs/speech.md).
    kw = dict(language="en", max_new_tokens=TS_MAX_NEW_TOKENS, num_beams=1)
    cases = []
    for name, audio, options in [
        ("short", short, dict(return_timestamps=True)),
        ("short-detected", short, dict(return_timestamps=True, language=None)),
        ("long", long, dict(return_timestamps=True)),
        ("chunked", long, dict(return_timestamps=True, chunk_length_s=TS_CHUNK_S)),
        ("chunked-text", long, dict(chunk_length_s=TS_CHUNK_S)),
    ]:
        gen = dict(kw)
        if "language" in options:
            gen["language"] = options.pop("language")
        with torch.no_grad():
            out = asr(audio.copy(), generate_kwargs=gen, **options)
        case = {"name": name, "language": gen["language"], **options, "text": out["text"]}
        if "chunks" in out:
            case["chunks"] = [{"timestamp": list(c["timestamp"]), "text": c["text"]} for c in out["chunks"]]
        if "chunk_length_s" not in options:
            features = extractor(audio, sampling_rate=RATE, return_tensors="pt", truncation=False,
                                 padding="longest" if len(audio) > extractor.n_samples else "max_length")
            with torch.no_grad():
                case["tokens"] = model.generate(features.input_features, return_timestamps=True, **gen)[0].tolist()
        log(f"{name}: {out}")
        cases.append(case)
    write_json(path, dict(stamp, maxNewTokens=TS_MAX_NEW_TOKENS, cases=cases))


def segment_goldens(src, out_dir, manifest):
    """Each window's passes through generate_with_fallback, recorded by wrapping _need_fallback."""
    import zlib

    import numpy as np
    import torch
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration, WhisperTokenizer
    from transformers.generation.logits_process import WhisperNoSpeechDetection
    from transformers.models.whisper.generation_whisper import _get_attr_from_logit_processors

    path = os.path.join(out_dir, "segments.json")
    stamp = {"exportHash": manifest["source"]["hash"], "v": 1}
    if up_to_date(log, path, stamp):
        return
    model = WhisperForConditionalGeneration.from_pretrained(src).eval()
    extractor = WhisperFeatureExtractor.from_pretrained(src)
    tokenizer = WhisperTokenizer.from_pretrained(src)
    tb = model.generation_config.no_timestamps_token_id + 1
    windows = []
    inner_fallback, inner_need = model.generate_with_fallback, model._need_fallback

    def with_fallback(*a, **kw):
        windows.append({"seek": int(kw["seek"][0]), "passes": []})
        return inner_fallback(*a, **kw)

    def need(seek_sequence, seek_outputs, index, logits_processor, generation_config, vocab_size, temperature):
        verdict = inner_need(seek_sequence, seek_outputs, index, logits_processor, generation_config, vocab_size,
                             temperature)
        tokens = seek_sequence.tolist()
        text = tokenizer.decode([t for t in tokens if t < tb], skip_special_tokens=True).strip().encode()
        no_speech = _get_attr_from_logit_processors(logits_processor, WhisperNoSpeechDetection, "no_speech_prob")
        windows[-1]["passes"].append({
            "temperature": temperature, "tokens": tokens,
            "avgLogprob": float(model._retrieve_avg_logprobs(seek_outputs[index]["scores"], seek_sequence,
                                                             temperature)),
            "tokenCompressionRatio": model._retrieve_compression_ratio(seek_sequence, vocab_size),
            "compressionRatio": len(text) / len(zlib.compress(text)),
            "noSpeechProb": float(no_speech[index]), "fallback": verdict[0], "skip": verdict[1]})
        return verdict

    model.generate_with_fallback, model._need_fallback = with_fallback, need
    short = speech_like()
    long = np.concatenate([speech_like(seconds=s) for s in LONG_PIECES])
    # Thresholds that never fire: every window's greedy pass, measured.
    never = dict(temperature=0.0, logprob_threshold=-1e9, compression_ratio_threshold=1e9, no_speech_threshold=1.0)
    cases = []
    for name, audio, options in [
        ("short", short, never),
        ("long", long, never),
        # Silence: windows whose log-probability is under the median are skipped (no_speech_prob > 0).
        ("silence", long, "median"),
        # Forced fallback: the random model's passes are all under -1, so each ends at 1.0 (sampled).
        ("fallback", short, dict(temperature=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0), logprob_threshold=-1.0,
                                 compression_ratio_threshold=2.4, no_speech_threshold=0.6)),
    ]:
        if options == "median":
            logprobs = sorted(w["passes"][-1]["avgLogprob"] for w in cases[1]["windows"])
            median = (logprobs[len(logprobs) // 2 - 1] + logprobs[len(logprobs) // 2]) / 2
            options = dict(temperature=0.0, logprob_threshold=median, no_speech_threshold=0.0)
        features = extractor(audio, sampling_rate=RATE, return_tensors="pt", truncation=False,
                             padding="longest" if len(audio) > extractor.n_samples else "max_length")
        windows.clear()
        torch.manual_seed(0)
        with torch.no_grad():
            out = model.generate(features.input_features, language="en", return_timestamps=True,
                                 return_segments=True, max_new_tokens=TS_MAX_NEW_TOKENS, num_beams=1, **options)
        case = {"name": name, **{k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
                "windows": [dict(w) for w in windows], "tokens": out["sequences"][0].tolist()}
        log(f"{name}: {len(windows)} windows, temperatures {[w['passes'][-1]['temperature'] for w in windows]}")
        cases.append(case)
    write_json(path, dict(stamp, maxNewTokens=TS_MAX_NEW_TOKENS, cases=cases))


def beam_goldens(src, ts_src, out_dir, manifest, ts_manifest):
    """Beam search: generate(num_beams=N) on both configs; the pipeline's default beams."""
    import numpy as np
    import torch
    from transformers import (AutoFeatureExtractor, AutoTokenizer, WhisperForConditionalGeneration,
                              WhisperTokenizer, pipeline)

    path = os.path.join(out_dir, "beams.json")
    stamp = {"exportHash": manifest["source"]["hash"], "tsExportHash": ts_manifest["source"]["hash"], "v": 1}
    if up_to_date(log, path, stamp):
        return
    # One thread: a tiny model's steps are too small for more, and on shared cores the extra
    # threads' spinning costs ten times the work (measured: 30 s of CPU against 3).
    torch.set_num_threads(1)
    cases = []
    extractor = AutoFeatureExtractor.from_pretrained(src)
    tok = AutoTokenizer.from_pretrained(src)
    model = WhisperForConditionalGeneration.from_pretrained(src).eval()
    features = extractor(speech_like(), sampling_rate=RATE, return_tensors="pt").input_features
    tb = manifest["tokens"]["timestampBegin"]
    for options in [dict(language="en", num_beams=3), dict(language="en", num_beams=5),
                    dict(language="fr", task="translate", num_beams=4, length_penalty=0.6, early_stopping=True),
                    dict(language="en", num_beams=2, length_penalty=2.0, early_stopping="never"),
                    dict(language=None, num_beams=3, length_penalty=0.0)]:
        with torch.no_grad():
            out = model.generate(features, max_new_tokens=MAX_NEW_TOKENS, return_dict_in_generate=True,
                                 output_scores=True, **options)
        sequence = out.sequences[0].tolist()
        case = dict(options, model="model", sequence=sequence, sequencesScore=float(out.sequences_scores[0]),
                    text=tok.decode([t for t in sequence if t < tb], skip_special_tokens=True))
        log(f"beams {options}: {sequence} {case['sequencesScore']:.5f}")
        cases.append(case)

    # ts-model with timestamps: each window's pass recorded where _need_fallback sees it.
    model = WhisperForConditionalGeneration.from_pretrained(ts_src).eval()
    extractor = AutoFeatureExtractor.from_pretrained(ts_src)
    passes = []
    inner_need = model._need_fallback

    def need(seek_sequence, seek_outputs, index, logits_processor, generation_config, vocab_size, temperature):
        passes.append({"tokens": seek_sequence.tolist(), "temperature": temperature,
                       "sequencesScore": float(seek_outputs[index]["sequences_scores"]),
                       "avgLogprob": float(model._retrieve_avg_logprobs(seek_outputs[index]["scores"], seek_sequence,
                                                                        temperature))})
        return inner_need(seek_sequence, seek_outputs, index, logits_processor, generation_config, vocab_size,
                          temperature)

    model._need_fallback = need
    long = np.concatenate([speech_like(seconds=s) for s in LONG_PIECES])
    never = dict(temperature=0.0, logprob_threshold=-1e9, compression_ratio_threshold=1e9)
    for name, audio, beams in [("ts-short", speech_like(), 3), ("ts-long", long, 2)]:
        feats = extractor(audio, sampling_rate=RATE, return_tensors="pt", truncation=False,
                          padding="longest" if len(audio) > extractor.n_samples else "max_length")
        passes.clear()
        with torch.no_grad():
            out = model.generate(feats.input_features, language="en", return_timestamps=True, return_segments=True,
                                 max_new_tokens=TS_MAX_NEW_TOKENS, num_beams=beams, **never)
        cases.append({"name": name, "model": "ts-model", "language": "en", "num_beams": beams,
                      "return_timestamps": True, "windows": [dict(p) for p in passes],
                      "tokens": out["sequences"][0].tolist()})
        log(f"{name}: {len(passes)} windows, tokens {out['sequences'][0].tolist()}")
    model = WhisperForConditionalGeneration.from_pretrained(ts_src).eval()
    asr = pipeline("automatic-speech-recognition", model=model, tokenizer=WhisperTokenizer.from_pretrained(ts_src),
                   feature_extractor=extractor)
    assert asr._prepare_generate_kwargs({"language": "en"})["num_beams"] == 5
    with torch.no_grad():
        out = asr(speech_like(), generate_kwargs=dict(language="en", max_new_tokens=TS_MAX_NEW_TOKENS),
                  return_timestamps=True)
    cases.append({"name": "pipeline-default", "model": "ts-model", "language": "en", "num_beams": 5,
                  "return_timestamps": True, "text": out["text"],
                  "chunks": [{"timestamp": list(c["timestamp"]), "text": c["text"]} for c in out["chunks"]]})
    log(f"pipeline default (5 beams): {out}")
    write_json(path, dict(stamp, maxNewTokens=MAX_NEW_TOKENS, tsMaxNewTokens=TS_MAX_NEW_TOKENS, cases=cases))


def main():
    p = argparse.ArgumentParser(prog=PROG)
    p.add_argument("--out", default=os.path.join(HERE, "golden", "whisper"))
    p.add_argument("--audio-fixtures", action="store_true")
    args = p.parse_args()
    if args.audio_fixtures:
        import soundfile as sf

        for ext, kw in (("flac", {}), ("mp3", {}), ("ogg", {"subtype": "VORBIS"})):
            sf.write(os.path.join(HERE, "fixtures", "audio", f"speech.{ext}"), speech_like(), RATE, **kw)
        return
    os.makedirs(args.out, exist_ok=True)
    wav_path = os.path.join(args.out, "speech.wav")
    write_wav(wav_path, speech_like(), RATE)
    write_wav(os.path.join(args.out, "speech44k.wav"), speech_like(44100), 44100, channels=2)
    make_tokenizer(os.path.join(args.out, "tokenizer"))
    src = os.path.join(args.out, "src")
    make_source(src, os.path.join(args.out, "tokenizer"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    want = exporter("export_whisper").whisper_hash(src, argparse.Namespace(format="torchscript"))
    manifest = export_folder(log, "export_whisper", src, os.path.join(args.out, "model"), want, [])
    goldens(src, args.out, wav_path, manifest)
    import numpy as np

    write_wav(os.path.join(args.out, "long.wav"), np.concatenate([speech_like(seconds=s) for s in LONG_PIECES]), RATE)
    ts_src = os.path.join(args.out, "ts-src")
    make_ts_source(ts_src, os.path.join(args.out, "tokenizer"))
    want = exporter("export_whisper").whisper_hash(ts_src, argparse.Namespace(format="torchscript"))
    ts_manifest = export_folder(log, "export_whisper", ts_src, os.path.join(args.out, "ts-model"), want, [])
    timestamp_goldens(ts_src, args.out, ts_manifest)
    segment_goldens(ts_src, args.out, ts_manifest)
    beam_goldens(src, ts_src, args.out, manifest, ts_manifest)


if __name__ == "__main__":
    main()
