"""Python side of bench/multimodal.js (npm run bench:multimodal).

    python bench/multimodal_child.py prepare OUT
        The bench's checkpoint, once, under OUT (git-ignored models/golden/bench-multimodal):
        OUT/whisper-src, a random-weight WhisperForConditionalGeneration (seed 0) of whisper-tiny's
        layers and widths (4 + 4 layers, 384 wide, 6 heads, FFN 1536, 80 mels) over the fixture
        tokenizer of models/make_whisper_models.py (no Whisper tokenizer ships in a registry
        package: its vocabulary is smaller than Whisper's 51,865, so the output projection costs
        less than whisper-tiny's on both sides), and OUT/speech.f32, 10 s of its test signal.
    python bench/multimodal_child.py prepare-vlm OUT
        OUT/smolvlm-src, a random-weight SmolVLMForConditionalGeneration (seed 0) of
        SmolVLM-256M-Instruct's vision tower (12 layers, 768 wide, 512-pixel tiles in 16-pixel
        patches, pixel shuffle 4: 64 tokens a tile) and SmolLM2-135M's decoder (30 layers, 576 wide,
        9 heads, 3 KV heads) over models/make_vlm_models.py's tokenizer, with SmolVLM's processor
        settings (longest edge 2048, image splitting) and chat template.
    python bench/multimodal_child.py serve image-text-to-text SRC THREADS NEW_TOKENS
        SmolVLMForConditionalGeneration.generate (greedy, NEW_TOKENS at most) on chelsea.png and a
        question through the processor; `one`, `many` (N chats as one padded batch) and `tokens`
        as below.
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


def prepare_vlm(out):
    import torch
    import transformers
    from make_vlm_models import SMOLVLM_SPECIALS, SMOLVLM_TEMPLATE, TOKENIZER

    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import vlm_idefics3

    vlm_idefics3.allow_without_num2words()
    src = os.path.join(out, "smolvlm-src")
    os.makedirs(src, exist_ok=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(TOKENIZER)
    tokenizer.add_special_tokens({"additional_special_tokens": SMOLVLM_SPECIALS})
    tokenizer.save_pretrained(src)
    tokenizer = transformers.AutoTokenizer.from_pretrained(src)
    eou = tokenizer.convert_tokens_to_ids("<end_of_utterance>")
    text = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, max_position_embeddings=8192, tie_word_embeddings=True, bos_token_id=1,
        eos_token_id=[2, eou], pad_token_id=0)
    vision = transformers.SmolVLMVisionConfig(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                              num_attention_heads=12, image_size=512, patch_size=16)
    config = transformers.SmolVLMConfig(vision_config=vision, text_config=text, scale_factor=4,
                                        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
                                        tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.SmolVLMForConditionalGeneration(config).eval()
    model.generation_config = transformers.GenerationConfig(bos_token_id=1, eos_token_id=[2, eou], pad_token_id=0,
                                                            do_sample=False)
    model.save_pretrained(src)
    images = transformers.SmolVLMImageProcessor(size={"longest_edge": 2048}, max_image_size={"longest_edge": 512})
    transformers.SmolVLMProcessor(image_processor=images, tokenizer=tokenizer,
                                  video_processor=transformers.SmolVLMVideoProcessor(), image_seq_len=64,
                                  chat_template=SMOLVLM_TEMPLATE).save_pretrained(src)
    tokenizer.chat_template = SMOLVLM_TEMPLATE
    tokenizer.save_pretrained(src)


VLM_QUESTION = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in the picture?"}]}]


def serve_vlm(src, threads, new_tokens):
    import torch
    import transformers
    from PIL import Image

    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import vlm_idefics3

    vlm_idefics3.allow_without_num2words()
    torch.set_num_threads(int(threads))
    model = transformers.AutoModelForImageTextToText.from_pretrained(src, dtype=torch.float32).eval()
    processor = transformers.AutoProcessor.from_pretrained(src)
    processor.tokenizer.padding_side = "left"
    image = Image.open(os.path.join(HERE, "..", "models", "images", "chelsea.png")).convert("RGB")
    text = processor.apply_chat_template(VLM_QUESTION, add_generation_prompt=True)

    def chats(n):
        inputs = processor(text=[text] * n, images=[[image]] * n, return_tensors="pt", padding=True)
        out = model.generate(**inputs, do_sample=False, max_new_tokens=int(new_tokens))
        return int(out.shape[-1] - inputs["input_ids"].shape[-1])

    with torch.inference_mode():
        chats(1)
        print('{"ready": true}', flush=True)
        for line in sys.stdin:
            cmd, *rest = line.split()
            if cmd == "quit":
                break
            if cmd == "tokens":
                print(chats(1), flush=True)
                continue
            n = int(rest[0])
            t0 = time.perf_counter()
            if cmd == "one":
                for _ in range(n):
                    chats(1)
            else:
                chats(n)
            print((time.perf_counter() - t0) * 1e3, flush=True)


def serve(task, src, threads, new_tokens):
    if task == "image-text-to-text":
        return serve_vlm(src, threads, new_tokens)
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
    elif sys.argv[1] == "prepare-vlm":
        prepare_vlm(sys.argv[2])
    else:
        serve(*sys.argv[2:6])
