"""Python side of bench/multimodal.js (npm run bench:multimodal).

    python bench/multimodal_child.py prepare OUT
        The bench's checkpoint, once, under OUT (git-ignored models/golden/bench-multimodal):
        OUT/whisper-src, a random-weight WhisperForConditionalGeneration (seed 0) of whisper-tiny's
        layers and widths (4 + 4 layers, 384 wide, 6 heads, FFN 1536, 80 mels) over the fixture
        tokenizer of models/make_whisper_models.py (no Whisper tokenizer ships in a registry
        package: its vocabulary is smaller than Whisper's 51,865, so the output projection costs
        less than whisper-tiny's on both sides), and OUT/speech.f32, 10 s of its test signal.
    python bench/multimodal_child.py serve TASK SRC THREADS NEW_TOKENS
        transformers' pipeline("automatic-speech-recognition", SRC) in a persistent child, greedy
        (num_beams=1), language "en", NEW_TOKENS new tokens at most; one request per stdin line:
            one N SEED    -> ms for N calls of the clip, one after another
            many N SEED   -> ms for N clips passed as one list, batch_size=N (Python has no
                             concurrent callers to gather: this is the batch a caller makes)
            tokens        -> the tokens one call generates (to check both sides did the same work)
            quit
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
SECONDS = 10


def prepare(out):
    import numpy as np
    import torch
    from make_whisper_models import make_tokenizer, speech_like
    from transformers import (AutoTokenizer, GenerationConfig, WhisperConfig, WhisperFeatureExtractor,
                              WhisperForConditionalGeneration)
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    src = os.path.join(out, "whisper-src")
    make_tokenizer(src)
    tok = AutoTokenizer.from_pretrained(src)
    ids = tok.convert_tokens_to_ids
    eos, sot = ids("<|endoftext|>"), ids("<|startoftranscript|>")
    config = WhisperConfig(vocab_size=len(tok), num_mel_bins=80, d_model=384, encoder_layers=4, decoder_layers=4,
                           encoder_attention_heads=6, decoder_attention_heads=6, encoder_ffn_dim=1536,
                           decoder_ffn_dim=1536, max_source_positions=1500, max_target_positions=448,
                           decoder_start_token_id=sot, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    torch.manual_seed(0)
    WhisperForConditionalGeneration(config).eval().save_pretrained(src)
    WhisperFeatureExtractor(feature_size=80).save_pretrained(src)
    GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos, max_length=448,
        is_multilingual=True, no_timestamps_token_id=ids("<|notimestamps|>"),
        lang_to_id={f"<|{c}|>": ids(f"<|{c}|>") for c in LANGUAGES},
        task_to_id={"translate": ids("<|translate|>"), "transcribe": ids("<|transcribe|>")},
        # No timestamps and no end of text: every call generates the same number of tokens.
        suppress_tokens=[eos] + list(range(ids("<|0.00|>"), len(tok))),
        begin_suppress_tokens=[eos],
    ).save_pretrained(src)
    np.asarray(speech_like(seconds=SECONDS), dtype="<f4").tofile(os.path.join(out, "speech.f32"))


def serve(task, src, threads, new_tokens):
    import numpy as np
    import torch
    from transformers import WhisperTokenizer, pipeline

    torch.set_num_threads(int(threads))
    assert task == "automatic-speech-recognition", task
    # The fixture tokenizer's config names no class: the pipeline needs Whisper's (_decode_asr).
    pipe = pipeline(task, model=src, tokenizer=WhisperTokenizer.from_pretrained(src), device="cpu")
    audio = np.fromfile(os.path.join(os.path.dirname(src), "speech.f32"), dtype="<f4")
    kwargs = {"generate_kwargs": {"max_new_tokens": int(new_tokens), "num_beams": 1, "language": "en",
                                  "task": "transcribe", "return_timestamps": False}}
    clip = lambda: {"raw": audio.copy(), "sampling_rate": 16000}  # noqa: E731 (the pipeline consumes it)
    with torch.inference_mode():
        pipe(clip(), **kwargs)
        print('{"ready": true}', flush=True)
        for line in sys.stdin:
            cmd, *rest = line.split()
            if cmd == "quit":
                break
            if cmd == "tokens":
                inputs = pipe.feature_extractor(audio, sampling_rate=16000, return_tensors="pt")
                out = pipe.model.generate(inputs.input_features, **kwargs["generate_kwargs"])
                print(int(out.shape[-1]), flush=True)
                continue
            n = int(rest[0])
            t0 = time.perf_counter()
            if cmd == "one":
                for _ in range(n):
                    pipe(clip(), **kwargs)
            else:
                pipe([clip() for _ in range(n)], batch_size=n, **kwargs)
            print((time.perf_counter() - t0) * 1e3, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    else:
        serve(*sys.argv[2:6])
