"""python/quantize_lm.py's input embedding table, eager, on tiny random transformers models
(lm-families.test.js runs it and checks what it prints: one JSON line per case).

Each case quantizes a model with quantize_lm.quantize and reports: the manifest's `embedding` and
`embedding_kept`; whether the table's module was replaced; whether its int8 rows are the output
head's own tensor; the largest error of the gathered rows against the float table, in units of
each row's half-step (scale / 2: at most 1 when every value rounds to its nearest step).
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402
import transformers  # noqa: E402

import quantize_lm  # noqa: E402


def model(kind, vocab, tie):
    torch.manual_seed(0)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tie)
    if kind == "gemma3":
        config = transformers.Gemma3TextConfig(head_dim=32, **common)
        return transformers.Gemma3ForCausalLM(config).eval()
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**common)).eval()


def case(name, kind, vocab, tie, scheme):
    m = model(kind, vocab, tie)
    table = m.get_input_embeddings()
    weight = table.weight.detach().float().clone()
    embed_scale = getattr(table, "embed_scale", None)
    q = quantize_lm.quantize(m, scheme, torch.float32, torch.float32)
    got_table = m.get_input_embeddings()
    ids = torch.arange(vocab).view(1, -1)
    with torch.no_grad():
        got = got_table(ids)[0].float()
    want = weight if embed_scale is None else weight * embed_scale.float()
    half_step = (weight.abs().amax(1) / 127 / 2).clamp(min=1e-12)
    if embed_scale is not None:
        half_step = half_step * embed_scale.float()
    head = m.get_output_embeddings()
    return {
        "name": name,
        "embedding": q["embedding"],
        "embedding_kept": q["embedding_kept"],
        "replaced": got_table is not table,
        "shares_head": hasattr(got_table, "qweight") and hasattr(head, "qweight")
        and got_table.qweight.data_ptr() == head.qweight.data_ptr(),
        "qweight_dtype": str(got_table.qweight.dtype) if hasattr(got_table, "qweight") else None,
        "worst_in_half_steps": ((got - want).abs() / half_step[:, None]).max().item(),
    }


CASES = [
    # int8, tied: the head's int8 rows are the table's.
    ("llama int8 tied", "llama", 416, True, "int8"),
    # int8, untied: the table's own int8 copy.
    ("llama int8 untied", "llama", 416, False, "int8"),
    # int4 with a head it quantizes (416 outputs, a multiple of 16): the table's own int8 copy.
    ("llama int4 tied", "llama", 416, True, "int4"),
    # int4 whose tied head stays in float (403 outputs): the table stays in float too.
    ("llama int4 tied, head in float", "llama", 403, True, "int4"),
    # Gemma 3's scaled embedding: the scale applied after the int8 rows, one copy with the head.
    ("gemma3 int8 tied", "gemma3", 416, True, "int8"),
]

for c in CASES:
    print(json.dumps(case(*c)), flush=True)
