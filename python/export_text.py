#!/usr/bin/env python3
"""Turns a Hugging Face or sentence-transformers text encoder into a torch-node model folder.

    python export_text.py MODEL_DIR OUT_DIR [--dtype float32|bfloat16|float16]
                          [--format auto|pt2|torchscript] [--max-batch 1024]
                          [--task auto|feature-extraction|text-classification|text-ranking|
                                  token-classification|fill-mask]

Run with your own Python, torch and transformers (`npx torch-node export` runs it for you). It
writes into OUT_DIR:

  model.pt2           the encoder and its pooling as one program: torch.export with a dynamic
                      batch (1..--max-batch) and sequence length (1..max_position_embeddings),
                      compiled ahead of time by AOTInductor (torch.AOTModule loads it);
  model.pt            instead, where torch.export fails (or --format torchscript): the same module
                      traced with torch.jit.trace (torch.ScriptModule loads it);
  tokenizer.json      (+ tokenizer_config.json, special_tokens_map.json when the model has them);
  manifest.json       what torch.text.SentenceEncoder needs: input names and dtypes, output,
                      pooling, normalization, maximum sequence length, dtype.

The program takes `input_ids`, `attention_mask` (and `token_type_ids` where the model's tokenizer
produces them), int64 [batch, seq], right-padded, and returns the pooled sentence embeddings,
float32 [batch, dim], not normalized (normalization is a per-call choice in torch-node).

The task (--task auto) comes from config.json's `architectures`: a `*ForSequenceClassification`
checkpoint is a classifier (text-classification; text-ranking when it has one logit and is a
sentence-transformers CrossEncoder: config.json has a `sentence_transformers` entry, or
config_sentence_transformers.json says CrossEncoder), `*ForTokenClassification` and `*ForMaskedLM`
ones as below, any other a sentence encoder (feature-extraction). A classifier's program returns
the logits, float32 [batch, num_labels]; its manifest (kind 'text-classifier') records the task,
the labels, the problem_type and the CrossEncoder's activation, which torch.pipeline applies
(lib/text/pipeline.js).
A `*ForTokenClassification` checkpoint (token-classification) returns each token's logits, padded
to the manifest's maxSequenceLength so that every text has one row of the same width: float32
[batch, maxSequenceLength * num_labels] (kind 'token-classifier'). A `*ForMaskedLM` one without a
sentence-transformers modules.json (fill-mask) returns the vocabulary's logits at the first
`maskSlots` [MASK] tokens of each text, float32 [batch, maskSlots * vocab] (kind 'masked-lm'; zeros
for slots without a mask).

Works for BERT-family encoders (BERT, MiniLM, BGE, E5, MPNet, RoBERTa, DistilBERT, ...) with no
per-model code: anything `transformers.AutoModel` loads as an encoder whose first output is the
last hidden state. Exit status: 0 written; 1 the export failed; 2 bad arguments or an unsupported
model; 3 torch or transformers is missing. Every failure is one line on stderr.
"""

import hashlib
import inspect
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_common  # noqa: E402
from export_common import (Unsupported, compile_pt2, log, parser, run, staged_folder, trace,  # noqa: E402
                           write_manifest)

FORMAT_VERSION = 1
PROG = "export_text.py"
DTYPES = ("float32", "bfloat16", "float16")
# sentence-transformers' Pooling modes this export compiles into the program (ST 6's names).
POOLING_MODES = ("mean", "cls", "max", "mean_sqrt_len_tokens")
LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
TASKS = ("auto", "feature-extraction", "text-classification", "text-ranking", "token-classification", "fill-mask")
# fill-mask: the [MASK] tokens of one text whose logits the program returns (transformers' pipeline
# takes any number; a text with more is refused by torch.pipeline).
MASK_SLOTS = 4
# The head a task's checkpoint must have (config.json's architectures).
HEAD_SUFFIXES = {"token-classification": "ForTokenClassification", "fill-mask": "ForMaskedLM"}
# The manifest kind of each task's program (lib/text/pipeline.js loads the folder as this kind).
KINDS = {
    "feature-extraction": "sentence-encoder",
    "text-classification": "text-classifier",
    "text-ranking": "text-classifier",
    "token-classification": "token-classifier",
    "fill-mask": "masked-lm",
}
# sentence-transformers CrossEncoder's activation_fn (config.json's sentence_transformers entry)
# as torch.pipeline names it: the scores rerank returns.
CROSS_ENCODER_ACTIVATIONS = {
    "torch.nn.modules.activation.Sigmoid": "sigmoid",
    "torch.nn.modules.linear.Identity": "none",
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def describe_folder(model_dir):
    """What the folder says without loading weights: the Hugging Face model folder, pooling,
    normalization and sentence-transformers' max_seq_length (None when absent)."""
    if not os.path.isdir(model_dir):
        raise Unsupported(f"{model_dir}: not a folder (expected a Hugging Face or sentence-transformers model folder)")
    hf_dir, pooling_dir, normalize = model_dir, None, False
    modules_path = os.path.join(model_dir, "modules.json")
    if os.path.exists(modules_path):
        for module in read_json(modules_path):
            kind = module.get("type", "")
            path = os.path.join(model_dir, module.get("path", ""))
            short = kind.rsplit(".", 1)[-1]
            if short == "Transformer":
                hf_dir = path
            elif short == "Pooling":
                pooling_dir = path
            elif short == "Normalize":
                normalize = True
            else:
                raise Unsupported(f"{model_dir}: the sentence-transformers module {kind} is not supported "
                                  "(supported: Transformer, Pooling, Normalize)")
    if not os.path.exists(os.path.join(hf_dir, "config.json")):
        raise Unsupported(f"{hf_dir}: no config.json (expected a Hugging Face model folder)")
    pooling = "mean"  # sentence-transformers' default for a plain Hugging Face encoder
    if pooling_dir is not None:
        config = read_json(os.path.join(pooling_dir, "config.json"))
        mode = config.get("pooling_mode")
        if mode is None:
            mode = [LEGACY_POOLING_KEYS[k] for k in LEGACY_POOLING_KEYS if config.get(k)]
        modes = [mode] if isinstance(mode, str) else list(mode)
        if len(modes) != 1 or modes[0] not in POOLING_MODES:
            raise Unsupported(f"{pooling_dir}: pooling {modes} is not supported (one of: {', '.join(POOLING_MODES)})")
        pooling = modes[0]
    st_config = {}
    for folder in (hf_dir, model_dir):
        path = os.path.join(folder, "sentence_bert_config.json")
        if os.path.exists(path):
            st_config = read_json(path)
            break
    return hf_dir, pooling, normalize, st_config


def source_hash(model_dir, args):
    """A hash of the model folder's small files, the weights' sizes and mtimes, and the options:
    make_text_models.py skips an export whose hash is unchanged."""
    options = [FORMAT_VERSION, args.dtype, args.format, args.max_batch, getattr(args, "fast_compile", False)]
    if getattr(args, "task", "auto") != "auto":
        options.append(args.task)
    h = hashlib.sha256(json.dumps(options).encode())
    for script in (__file__, export_common.__file__):
        with open(script, "rb") as f:
            h.update(f.read())
    for root, dirs, files in os.walk(model_dir):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            st = os.stat(path)
            h.update(os.path.relpath(path, model_dir).encode())
            if name.endswith(".json") and st.st_size < 1 << 20:
                with open(path, "rb") as f:
                    h.update(f.read())
            else:
                h.update(f"{st.st_size}".encode())
    return h.hexdigest()


def main(argv):
    p = parser(PROG, "Export a text encoder to a torch-node model folder.",
               "a Hugging Face or sentence-transformers model folder", max_batch=1024)
    p.add_argument("--dtype", choices=DTYPES, default="float32", help="weights and compute dtype (default float32)")
    p.add_argument("--task", choices=TASKS, default="auto",
                   help="what the program returns: auto (from config.json's architectures, default), "
                        "feature-extraction (pooled embeddings), text-classification or text-ranking (logits), "
                        "token-classification (each token's logits), fill-mask (the [MASK] tokens' logits)")
    args = p.parse_args(argv)

    def export_folder():
        try:
            hf_dir, pooling, normalize, st_config = describe_folder(args.model_dir)
        except (OSError, ValueError) as e:
            raise Unsupported(f"{args.model_dir}: cannot read the model folder: {e}") from e
        task = detect_task(args.task, args.model_dir, hf_dir)
        export(args, hf_dir, pooling, normalize, st_config, task)

    run(PROG, args, export_folder)


def detect_task(asked, model_dir, hf_dir):
    """The task `--task` names, else the one config.json's architectures say (see the docstring)."""
    config = read_json(os.path.join(hf_dir, "config.json"))
    architectures = config.get("architectures") or []
    classifier = any(a.endswith("ForSequenceClassification") for a in architectures)
    # sentence-transformers 5+ saves a CrossEncoder with a modules.json (one Transformer) too; its
    # config_sentence_transformers.json says which it is.
    st_path = os.path.join(model_dir, "config_sentence_transformers.json")
    st_cross_encoder = os.path.exists(st_path) and read_json(st_path).get("model_type") == "CrossEncoder"
    st_pipeline = os.path.exists(os.path.join(model_dir, "modules.json")) and not st_cross_encoder
    if asked == "auto":
        if st_pipeline:
            return "feature-extraction"
        for task, suffix in HEAD_SUFFIXES.items():
            if any(a.endswith(suffix) for a in architectures):
                return task
        if not classifier:
            return "feature-extraction"
        cross_encoder = st_cross_encoder or "sentence_transformers" in config or "sbert_ce_default_activation_function" in config
        return "text-ranking" if cross_encoder and classifier_labels(config) == 1 else "text-classification"
    if asked != "feature-extraction" and st_pipeline:
        raise Unsupported(f"{model_dir}: --task {asked} takes a Hugging Face *ForSequenceClassification folder, "
                          "not a sentence-transformers pipeline (modules.json)")
    suffix = HEAD_SUFFIXES.get(asked)
    if suffix and architectures and not any(a.endswith(suffix) for a in architectures):
        # AutoModelFor... would load it with a random head and say so only in a warning.
        raise Unsupported(f"{hf_dir}: --task {asked} takes a *{suffix} checkpoint (one with the head's weights); "
                          f"config.json's architectures are {', '.join(architectures)}")
    if asked == "text-ranking" and classifier_labels(config) != 1:
        raise Unsupported(f"{hf_dir}: --task text-ranking takes a classifier with one logit (a CrossEncoder), "
                          f"this one has {classifier_labels(config)}")
    return asked


def classifier_labels(config):
    """num_labels as transformers' PretrainedConfig reads it from config.json (2 when unsaid)."""
    return len(config["id2label"]) if config.get("id2label") else config.get("num_labels", 2)


def ranking_activation(config, hf_dir):
    """sentence-transformers CrossEncoder's get_default_activation_fn: config.json's
    sentence_transformers.activation_fn (or the <4.0 key), else sigmoid for one logit."""
    path = (getattr(config, "sentence_transformers", None) or {}).get("activation_fn") or getattr(
        config, "sbert_ce_default_activation_function", None
    )
    if path is None:
        return "sigmoid" if config.num_labels == 1 else "none"
    if path not in CROSS_ENCODER_ACTIVATIONS:
        raise Unsupported(f"{hf_dir}: the CrossEncoder activation {path} is not supported "
                          f"(supported: {', '.join(CROSS_ENCODER_ACTIVATIONS)})")
    return CROSS_ENCODER_ACTIVATIONS[path]


def export(args, hf_dir, pooling, normalize, st_config, task="feature-extraction"):
    import torch
    import transformers
    from transformers import (AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification,
                              AutoModelForTokenClassification, AutoTokenizer)

    started = time.monotonic()
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(hf_dir)
    if getattr(config, "is_encoder_decoder", False) or getattr(config, "is_decoder", False):
        raise Unsupported(f"{hf_dir}: {config.model_type} is not an encoder (this export takes BERT-family "
                          "encoders: BERT, MiniLM, BGE, E5, MPNet, RoBERTa, ...)")
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES
    if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise Unsupported(f"{hf_dir}: {config.model_type} is a decoder (causal LM), not an encoder; this export takes "
                          "BERT-family encoders (BERT, MiniLM, BGE, E5, MPNet, RoBERTa, ...)")
    max_positions = getattr(config, "max_position_embeddings", None)
    if not isinstance(max_positions, int) or max_positions < 2:
        raise Unsupported(f"{hf_dir}: config.json has no max_position_embeddings; this export takes encoders with "
                          "learned or fixed positions (BERT-family)")

    log(f"loading {hf_dir} ({config.model_type}, {args.dtype})")
    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    if not getattr(tokenizer, "is_fast", False):
        raise Unsupported(f"{hf_dir}: no fast tokenizer (tokenizer.json) can be made for this model")
    if tokenizer.pad_token_id is None:
        raise Unsupported(f"{hf_dir}: the tokenizer has no padding token")
    dtype = getattr(torch, args.dtype)
    kind = KINDS[task]
    classifier = task != "feature-extraction"
    auto_class = {"sentence-encoder": AutoModel, "text-classifier": AutoModelForSequenceClassification,
                  "token-classifier": AutoModelForTokenClassification, "masked-lm": AutoModelForMaskedLM}[kind]
    mask_id = tokenizer.mask_token_id if kind == "masked-lm" else None
    if kind == "masked-lm" and mask_id is None:
        raise Unsupported(f"{hf_dir}: fill-mask needs a tokenizer with a mask token")
    model = auto_class.from_pretrained(hf_dir, dtype=dtype).eval()
    for p in model.parameters():
        p.requires_grad_(False)

    takes = inspect.signature(model.forward).parameters
    for name in ("input_ids", "attention_mask"):
        if name not in takes:
            raise Unsupported(f"{hf_dir}: {type(model).__name__}.forward takes no {name}")
    input_names = ["input_ids", "attention_mask"]
    if "token_type_ids" in takes and "token_type_ids" in tokenizer.model_input_names:
        input_names.append("token_type_ids")

    # sentence-transformers' rule: max_seq_length, else the tokenizer's model_max_length, capped
    # at max_position_embeddings.
    max_length = st_config.get("max_seq_length") or tokenizer.model_max_length
    if not isinstance(max_length, int) or max_length > 1_000_000:
        max_length = max_positions
    max_length = min(max_length, max_positions)
    if st_config.get("do_lower_case") and not lowercases(tokenizer):
        raise Unsupported(f"{hf_dir}: sentence_bert_config.json asks for do_lower_case on a tokenizer that does not lowercase")

    if kind == "token-classifier":
        encoder = HeadModule(model, torch, token_rows(max_length, torch))
    elif kind == "masked-lm":
        encoder = HeadModule(model, torch, mask_rows(mask_id, torch))
    elif classifier:
        encoder = HeadModule(model, torch)
    else:
        encoder = SentenceEncoderModule(model, pooling, torch)
    example = example_inputs(torch, input_names, tokenizer.pad_token_id, config, batch=2, seq=8, mask_id=mask_id)
    with torch.no_grad():
        dim = encoder(*example).shape[-1]

    with staged_folder(args.out_dir, ("model.pt2", "model.pt", "manifest.json", *TOKENIZER_FILES)) as tmp:
        program, fmt, check, export_error = None, None, None, None
        if args.format in ("auto", "pt2"):
            try:
                program, check = export_pt2(
                    torch, encoder, example, input_names, args.max_batch, max_positions, tmp, args.fast_compile
                )
                fmt = "pt2"
            except Exception as e:  # noqa: BLE001 - reported, then the fallback
                export_error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                if args.format == "pt2":
                    raise
                log(f"torch.export failed ({export_error}); falling back to TorchScript (torch.jit.trace)")
        if program is None:
            program, check = export_torchscript(torch, encoder, example, tmp)
            fmt = "torchscript"

        # The written program against the eager model on shapes it was not exported with.
        diff = verify(torch, encoder, check, input_names, tokenizer.pad_token_id, config, mask_id)
        tolerance = 1e-4 if args.dtype == "float32" else 5e-2
        if not diff <= tolerance:
            raise RuntimeError(f"the exported program differs from the eager model by {diff:.3g} (> {tolerance})")
        log(f"checked against the eager model: max abs diff {diff:.3g}")

        copy_tokenizer(hf_dir, tokenizer, tmp)
        manifest = {
            "format": "torch-node/text-model",
            "formatVersion": FORMAT_VERSION,
            "kind": kind,
            "program": program,
            "programFormat": fmt,  # 'pt2': torch.AOTModule; 'torchscript': torch.ScriptModule
            "inputs": [{"name": n, "dtype": "int64", "shape": ["batch", "sequence"]} for n in input_names],
            "output": {"name": "logits" if classifier else "sentence_embedding", "dtype": "float32",
                       "shape": ["batch", dim], "dim": dim},
            **(head_fields(config, task, hf_dir, tokenizer) if classifier else {"pooling": pooling}),
            "poolingInProgram": True,  # the program returns one row per text (fixed width), not token states
            # L2-normalize by default (sentence-transformers' Normalize module); never logits
            "normalize": normalize and not classifier,
            "maxSequenceLength": max_length,
            "padTokenId": tokenizer.pad_token_id,
            "padding": "right",
            "dtype": args.dtype,
            "dynamicShapes": {"batch": [1, args.max_batch], "sequence": [1, max_positions]} if fmt == "pt2" else None,
            "tokenizer": "tokenizer.json",
            "source": {
                "modelType": config.model_type,
                "architectures": getattr(config, "architectures", None),
                "hash": source_hash(args.model_dir, args),
            },
            "exportedWith": {"torch": torch.__version__, "transformers": transformers.__version__},
            "checkedMaxAbsDiff": diff,
        }
        if export_error is not None:
            manifest["exportError"] = export_error
        write_manifest(tmp, manifest)
    what = f"{task}, {dim} logits per text" if classifier else f"{dim}-dim, pooling {pooling}"
    log(f"wrote {args.out_dir} ({fmt}, {what}, max {max_length} tokens) "
        f"in {time.monotonic() - started:.0f} s")


def head_fields(config, task, hf_dir, tokenizer):
    """What torch.pipeline needs of a head besides the logits: transformers' pipeline picks a
    classifier's default function from problem_type and num_labels, a CrossEncoder's rank its
    activation; token-classification tells subwords by the tokenizer model's continuing-subword
    prefix (transformers' gather_pre_entities); fill-mask needs the mask token."""
    if task == "fill-mask":
        return {"task": task, "maskToken": tokenizer.mask_token, "maskTokenId": tokenizer.mask_token_id,
                "maskSlots": MASK_SLOTS}
    labels = {"task": task, "labels": [config.id2label[i] for i in range(config.num_labels)]}  # index order
    if task == "token-classification":
        model = json.loads(tokenizer.backend_tokenizer.to_str()).get("model") or {}
        return {**labels, "continuingSubwordPrefix": model.get("continuing_subword_prefix") or None,
                "unkTokenId": tokenizer.unk_token_id}
    return {
        **labels,
        "problemType": config.problem_type,  # None, single_label_classification, multi_label_..., regression
        "rankingActivation": ranking_activation(config, hf_dir),
    }


def lowercases(tokenizer):
    normalizer = json.loads(tokenizer.backend_tokenizer.to_str()).get("normalizer") or {}
    stack = [normalizer]
    while stack:
        n = stack.pop()
        if n.get("lowercase") or n.get("type") == "Lowercase":
            return True
        stack.extend(n.get("normalizers") or [])
    return False


def SentenceEncoderModule(model, pooling, torch):
    """The Hugging Face encoder and sentence-transformers' pooling as one module (the pooling is
    sentence-transformers' Pooling._forward_padded for right padding, accumulated in float32)."""

    class SentenceEncoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            hidden = run_model(self.model, input_ids, attention_mask, token_type_ids)[0]  # [batch, seq, dim]
            if pooling == "cls":
                return hidden[:, 0].float()  # right padding: the first token is the real first
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            if pooling == "max":
                return hidden.masked_fill(mask == 0, float("-inf")).max(dim=1).values.float()
            total = (hidden * mask).sum(dim=1, dtype=torch.float32)
            count = torch.clamp(mask.sum(dim=1, dtype=torch.float32), min=1e-9)
            return total / (count if pooling == "mean" else torch.sqrt(count))

    return SentenceEncoder().eval()


def run_model(model, input_ids, attention_mask, token_type_ids):
    """The Hugging Face model's outputs, token_type_ids passed only where the program takes them."""
    kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if token_type_ids is not None:
        kwargs["token_type_ids"] = token_type_ids
    return model(**kwargs)


def HeadModule(model, torch, rows=None):
    """A *ForSequenceClassification / *ForTokenClassification / *ForMaskedLM model's logits in
    float32, made one fixed-width row per text by `rows(logits, input_ids, attention_mask)` where
    they have a sequence dimension (SentenceEncoder's batching takes [batch, width])."""

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            logits = run_model(self.model, input_ids, attention_mask, token_type_ids).logits.float()
            return logits if rows is None else rows(logits, input_ids, attention_mask)

    return Head().eval()


def token_rows(width, torch):
    """Token classification: each text's [seq, labels] logits padded (with zeros) to `width`
    tokens, float32 [batch, width * num_labels]."""

    def rows(logits, input_ids, attention_mask):
        padded = torch.nn.functional.pad(logits, (0, 0, 0, width - logits.shape[1]))
        return padded.reshape(logits.shape[0], -1)

    return rows


def mask_rows(mask_id, torch):
    """Fill-mask: the logits at each text's first MASK_SLOTS mask tokens (in order; zeros for slots
    with no mask), float32 [batch, MASK_SLOTS * vocab]. A one-hot per slot picks the position, so
    the program has no data-dependent shapes."""

    def rows(logits, input_ids, attention_mask):
        is_mask = (input_ids == mask_id) & (attention_mask != 0)
        rank = torch.cumsum(is_mask.to(torch.int64), dim=1)  # the 1-based slot of each mask
        slots = [torch.einsum("bs,bsv->bv", (is_mask & (rank == k + 1)).float(), logits) for k in range(MASK_SLOTS)]
        return torch.cat(slots, dim=1)

    return rows


def example_inputs(torch, input_names, pad_id, config, batch, seq, lengths=None, mask_id=None):
    """Right-padded inputs: random ids, the last row shorter than `seq` (unless batch is 1); with
    `mask_id`, a mask token at position 1 of each row and at 3 of the first."""
    generator = torch.Generator().manual_seed(batch * 1000 + seq)
    vocab = getattr(config, "vocab_size", 1000)
    ids = torch.randint(5, max(6, vocab), (batch, seq), generator=generator, dtype=torch.int64)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if lengths is None:
        lengths = [seq] * batch
        if batch > 1:
            lengths[-1] = max(2, seq // 2)
    if mask_id is not None:
        ids[:, 1] = mask_id
        ids[0, min(3, seq - 1)] = mask_id
    for row, length in enumerate(lengths):
        ids[row, length:] = pad_id
        mask[row, length:] = 0
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros(batch, seq, dtype=torch.int64)}
    return tuple(inputs[n] for n in input_names)


def export_pt2(torch, encoder, example, input_names, max_batch, max_positions, out, fast_compile=False):
    from torch.export import Dim

    # torch.export specializes sizes 0 and 1, so the examples are batch 2 and sequence 8; a
    # recorded lower bound of 2 still runs batch 1 (torch-node reads it as 1, as Python does).
    batch = Dim("batch", min=1, max=max_batch)
    sequence = Dim("sequence", min=1, max=max_positions)
    dynamic_shapes = tuple({0: batch, 1: sequence} for _ in input_names)
    log(f"torch.export: batch 1..{max_batch}, sequence 1..{max_positions}")
    with torch.no_grad():
        exported = torch.export.export(encoder, example, dynamic_shapes=dynamic_shapes, strict=False)
    log("AOTInductor: compiling (about a minute on 2 cores)")
    runner = compile_pt2(torch, exported, os.path.join(out, "model.pt2"), fast_compile)
    return "model.pt2", lambda *inputs: runner(*inputs)


def export_torchscript(torch, encoder, example, out):
    log("torch.jit.trace")
    with torch.no_grad():
        loaded = trace(torch, encoder, example, os.path.join(out, "model.pt"))
    return "model.pt", lambda *inputs: loaded(*inputs)


def verify(torch, encoder, run, input_names, pad_id, config, mask_id=None):
    """Max abs difference between the written program and the eager module on batches of other
    shapes than the example's: a program specialized to the example's sizes fails here."""
    worst = 0.0
    with torch.no_grad():
        for batch, seq in ((3, 13), (1, 5)):
            inputs = example_inputs(torch, input_names, pad_id, config, batch=batch, seq=seq, mask_id=mask_id)
            got = run(*inputs)
            if isinstance(got, (list, tuple)):
                got = got[0]
            want = encoder(*inputs)
            if tuple(got.shape) != tuple(want.shape):
                raise RuntimeError(f"the exported program gave shape {list(got.shape)} for batch {batch}, "
                                   f"sequence {seq}; the eager model {list(want.shape)}")
            worst = max(worst, (got.float() - want.float()).abs().max().item())
    return worst


def copy_tokenizer(hf_dir, tokenizer, out):
    """tokenizer.json as the model has it (torch-node's Tokenizer takes padding and truncation
    per call, as transformers does), else the fast tokenizer transformers builds."""
    for name in TOKENIZER_FILES:
        path = os.path.join(hf_dir, name)
        if os.path.exists(path):
            shutil.copyfile(path, os.path.join(out, name))
    if not os.path.exists(os.path.join(out, "tokenizer.json")):
        tokenizer.backend_tokenizer.save(os.path.join(out, "tokenizer.json"))


if __name__ == "__main__":
    main(sys.argv[1:])
