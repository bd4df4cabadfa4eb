//! The constraint against real tokenizers: random and adversarial token choices inside the mask
//! always give text that parses and validates; hostile inputs fail fast with InvalidArg.
use super::*;
use crate::error::describe;
use serde_json::Value as Json;
use std::time::Instant;

/// splitmix64: the tests' choices, seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// GPT-2's bytes_to_unicode: how a byte-level BPE spells `text`.
fn byte_level(text: &str) -> String {
    let mut next = 0x100u32;
    let table: Vec<char> = (0..=255u8)
        .map(|b| {
            let c = b as char;
            if matches!(c, '!'..='~' | '\u{A1}'..='\u{AC}' | '\u{AE}'..='\u{FF}') {
                c
            } else {
                next += 1;
                char::from_u32(next - 1).unwrap()
            }
        })
        .collect();
    text.bytes().map(|b| table[b as usize]).collect()
}

const EOS: u32 = 0;

/// A byte-level BPE: three special tokens, the 256 bytes, and multi-byte tokens that straddle
/// JSON's structure (`{"`, `": "`, `"]}`...) so a token can close one value and open another.
fn test_tokenizer() -> tokenizers::Tokenizer {
    let specials = ["<|endoftext|>", "<tool_call>", "</tool_call>"];
    let mut vocab = serde_json::Map::new();
    let mut added = Vec::new();
    for (i, s) in specials.iter().enumerate() {
        vocab.insert(s.to_string(), json!(i));
        added.push(
            json!({"id": i, "content": s, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true}),
        );
    }
    let mut words: Vec<String> = (0..=255u8)
        .map(|b| byte_level(std::str::from_utf8(&[b]).unwrap_or("?")))
        .collect();
    // Bytes over 0x7F are not UTF-8 alone: spell them from the byte directly.
    for (b, w) in words.iter_mut().enumerate().skip(0x80) {
        let mut next = 0x100u32;
        for c in 0..=255u8 {
            let ch = c as char;
            let selfmapped = matches!(ch, '!'..='~' | '\u{A1}'..='\u{AC}' | '\u{AE}'..='\u{FF}');
            if c as usize == b {
                *w = if selfmapped {
                    ch.to_string()
                } else {
                    char::from_u32(next).unwrap().to_string()
                };
            }
            if !selfmapped {
                next += 1;
            }
        }
    }
    let multi = [
        "{\"",
        "\"}",
        "\":",
        "\": ",
        "\": \"",
        "\", \"",
        "\", ",
        ", \"",
        "\"]",
        "\"]}",
        "]}",
        "}]",
        "},",
        "}}",
        "[\"",
        "[{",
        "{}",
        "[]",
        "name",
        "\"name\": \"",
        "arguments",
        "true",
        "false",
        "null",
        "12",
        "0.",
        "e+",
        "-1",
        " \"",
        "\n",
        "\n\n",
        "  ",
        "ab",
        "abc",
        "city",
        "Paris",
        "\\u00",
        "\\\"",
        "\\n",
        "é",
        "日本",
    ];
    words.extend(multi.iter().map(|m| byte_level(m)));
    for w in words {
        let id = vocab.len();
        vocab.entry(w).or_insert(json!(id));
    }
    let json = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": []}
    });
    tokenizers::Tokenizer::from_bytes(serde_json::to_vec(&json).unwrap()).unwrap()
}

fn vocabulary() -> (tokenizers::Tokenizer, Vocabulary) {
    let t = test_tokenizer();
    // Padded width: a model's embedding rounded up; the pad ids are never allowed.
    let width = t.get_vocab_size(true) + 7;
    let v = Vocabulary::from_tokenizer(&t, &[EOS], width).unwrap();
    (t, v)
}

fn code_of(r: Result<impl Sized>) -> (Code, String) {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => describe(&e),
    }
}

#[derive(Clone, Copy, Debug)]
enum Strategy {
    /// Any allowed token.
    Uniform,
    /// The longest allowed token (most bytes: crosses the most structure at once).
    Longest,
    /// Tokens that close things (quotes, brackets) when allowed: ends unbounded values.
    Closing,
    /// Tokens that start with a digit when allowed: numbers as long as the mask lets them be.
    Digits,
}

/// One walk: tokens chosen inside the mask until the constraint must stop or EOS is chosen
/// (or `cap` tokens); the text and whether it ended complete.
fn walk(
    grammar: &Grammar,
    t: &tokenizers::Tokenizer,
    rng: &mut Rng,
    strategy: Strategy,
    cap: usize,
) -> (String, bool) {
    let mut c = grammar.start();
    let mut ids = Vec::new();
    for _ in 0..cap {
        if c.must_stop() {
            let mask = c.mask().unwrap();
            assert!(mask.allows(EOS) && mask.count() == 1, "must stop: only EOS");
            return (t.decode(&ids, false).unwrap(), true);
        }
        let mask = c.mask().unwrap().clone();
        let allowed: Vec<u32> = (0..grammar.first.width as u32)
            .filter(|&i| mask.allows(i))
            .collect();
        assert!(
            !allowed.is_empty(),
            "a mask with no token after {:?}",
            t.decode(&ids, false)
        );
        for &a in &allowed {
            assert!(
                (a as usize) < t.get_vocab_size(true),
                "a padding id {a} was allowed"
            );
        }
        let text_of = |id: u32| t.decode(&[id], false).unwrap_or_default();
        let pick = match strategy {
            Strategy::Uniform => allowed[rng.below(allowed.len())],
            Strategy::Longest => *allowed
                .iter()
                .max_by_key(|&&i| (text_of(i).len(), rng.below(1000)))
                .unwrap(),
            Strategy::Digits => {
                let digits: Vec<u32> = allowed
                    .iter()
                    .copied()
                    .filter(|&i| text_of(i).starts_with(|c: char| c.is_ascii_digit()))
                    .collect();
                // No exponents: the bound allows 16 digits there too, past what f64 parses.
                let other: Vec<u32> = allowed
                    .iter()
                    .copied()
                    .filter(|&i| !text_of(i).contains(['e', 'E']))
                    .collect();
                match (digits.is_empty(), other.is_empty()) {
                    (false, _) => digits[rng.below(digits.len())],
                    (true, false) => other[rng.below(other.len())],
                    (true, true) => allowed[rng.below(allowed.len())],
                }
            }
            Strategy::Closing => {
                let closing: Vec<u32> = allowed
                    .iter()
                    .copied()
                    .filter(|&i| i == EOS || text_of(i).contains(['"', '}', ']']))
                    .collect();
                if !closing.is_empty() && rng.below(4) != 0 {
                    closing[rng.below(closing.len())]
                } else {
                    allowed[rng.below(allowed.len())]
                }
            }
        };
        // The logits path says the same as the bits, on a row wider than the vocabulary too.
        let mut logits = vec![0.0f32; grammar.first.width + 40];
        c.apply(&mut logits).unwrap();
        assert!(logits[pick as usize].is_finite());
        assert_eq!(logits.iter().filter(|l| l.is_finite()).count(), allowed.len());
        if pick == EOS {
            assert!(c.is_accepting(), "EOS allowed while the text is incomplete");
            return (t.decode(&ids, false).unwrap(), true);
        }
        c.advance(pick).unwrap();
        ids.push(pick);
    }
    (t.decode(&ids, false).unwrap(), c.is_accepting())
}

/// A JSON Schema validator for the subset the tests use (type, properties, required,
/// additionalProperties, items, min/maxItems, min/maxLength, minimum/maximum, enum, const,
/// anyOf, local $ref): the tests' oracle.
fn valid(v: &Json, s: &Json, root: &Json) -> bool {
    if let Some(r) = s["$ref"].as_str() {
        let target = r.trim_start_matches("#/").split('/').fold(root, |n, k| &n[k]);
        return valid(v, target, root);
    }
    if let Some(any) = s["anyOf"].as_array() {
        if !any.iter().any(|a| valid(v, a, root)) {
            return false;
        }
    }
    if let Some(e) = s["enum"].as_array() {
        if !e.contains(v) {
            return false;
        }
    }
    if !s["const"].is_null() && &s["const"] != v {
        return false;
    }
    let type_ok = |t: &str| match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        // Integers past 2^64 parse as f64: still integers (as 1.0 is, in JSON Schema).
        "integer" => v.as_f64().is_some_and(|x| x.fract() == 0.0),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    };
    match &s["type"] {
        Json::String(t) if !type_ok(t) => return false,
        Json::Array(ts) if !ts.iter().any(|t| type_ok(t.as_str().unwrap_or(""))) => return false,
        _ => {}
    }
    if let Some(o) = v.as_object() {
        for r in s["required"].as_array().into_iter().flatten() {
            if !o.contains_key(r.as_str().unwrap()) {
                return false;
            }
        }
        for (k, x) in o {
            let sub = &s["properties"][k];
            let ok = if !sub.is_null() {
                valid(x, sub, root)
            } else {
                match &s["additionalProperties"] {
                    Json::Bool(false) => false,
                    Json::Object(_) => valid(x, &s["additionalProperties"], root),
                    _ => true,
                }
            };
            if !ok {
                return false;
            }
        }
    }
    if let Some(a) = v.as_array() {
        let n = a.len() as u64;
        if s["minItems"].as_u64().is_some_and(|m| n < m) || s["maxItems"].as_u64().is_some_and(|m| n > m) {
            return false;
        }
        if s["items"].is_object() && !a.iter().all(|x| valid(x, &s["items"], root)) {
            return false;
        }
    }
    if let Some(text) = v.as_str() {
        let n = text.chars().count() as u64;
        if s["minLength"].as_u64().is_some_and(|m| n < m) || s["maxLength"].as_u64().is_some_and(|m| n > m) {
            return false;
        }
    }
    if let Some(x) = v.as_f64() {
        if s["minimum"].as_f64().is_some_and(|m| x < m) || s["maximum"].as_f64().is_some_and(|m| x > m) {
            return false;
        }
    }
    true
}

fn schemas() -> Vec<Json> {
    vec![
        json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 130},
            "city": {"enum": ["Paris", "Tokyo", "日本"]},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
            "ok": {"type": "boolean"}
        }, "required": ["name", "age", "city"], "additionalProperties": false}),
        json!({"type": "array", "items": {"anyOf": [{"type": "null"}, {"type": "number", "minimum": -5, "maximum": 5}]},
            "minItems": 1, "maxItems": 4}),
        json!({"$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"], "additionalProperties": false}},
            "type": "object", "properties": {"a": {"$ref": "#/$defs/point"}, "b": {"$ref": "#/$defs/point"}},
            "required": ["a"], "additionalProperties": false}),
        json!({"type": "string", "minLength": 2, "maxLength": 6}),
    ]
}

#[test]
fn random_walks_inside_the_mask_give_valid_json() {
    let (t, v) = vocabulary();
    let mut rng = Rng(7);
    for schema in schemas() {
        let format = Format::JsonSchema {
            schema: schema.clone(),
            strict: true,
        };
        let grammar = v.compile(&format).unwrap();
        let mut complete = 0;
        for run in 0..60 {
            let strategy = [Strategy::Uniform, Strategy::Longest, Strategy::Closing][run % 3];
            let (text, done) = walk(&grammar, &t, &mut rng, strategy, 400);
            if !done {
                continue;
            }
            complete += 1;
            let value: Json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{strategy:?} gave {text:?}, not JSON: {e}"));
            assert!(
                valid(&value, &schema, &schema),
                "{text} does not validate against {schema}"
            );
        }
        assert!(
            complete >= 30,
            "only {complete} of 60 walks completed for {schema}"
        );
    }
}

#[test]
fn a_format_compiled_again_comes_from_the_kept_ones_and_the_oldest_goes_past_the_bound() {
    let (t, v) = vocabulary();
    let pattern = |i: usize| Format::Regex(format!("a{{{i}}}"));
    let first = v.compile(&pattern(1)).unwrap();
    assert_eq!(v.kept(), 1);
    // Kept: the same grammar again, not a second entry; a copy that starts afresh.
    let again = v.compile(&pattern(1)).unwrap();
    assert_eq!(v.kept(), 1);
    let mut rng = Rng(3);
    for g in [&first, &again] {
        assert_eq!(
            walk(g, &t, &mut rng, Strategy::Closing, 10),
            ("a".to_string(), true)
        );
    }
    // A format that fails is not kept (and fails again).
    let bad = Format::Regex("(".into());
    for _ in 0..2 {
        let Err(e) = v.compile(&bad) else {
            panic!("'(' compiled")
        };
        assert_eq!(describe(&e).0, Code::InvalidArg);
    }
    assert_eq!(v.kept(), 1);
    // Past the bound the least recently used goes: pattern(1) was used last before 2..=16.
    for i in 2..=COMPILED_KEPT + 1 {
        v.compile(&pattern(i)).unwrap();
    }
    assert_eq!(v.kept(), COMPILED_KEPT);
    let kept = |f: &Format| lock(&v.compiled).iter().any(|(k, _)| k == f);
    assert!(!kept(&pattern(1)) && kept(&pattern(2)) && kept(&pattern(COMPILED_KEPT + 1)));
}

#[test]
fn json_object_gives_objects_and_ends() {
    let (t, v) = vocabulary();
    let grammar = v.compile(&Format::JsonObject).unwrap();
    let mut rng = Rng(11);
    let mut complete = 0;
    for _ in 0..40 {
        let (text, done) = walk(&grammar, &t, &mut rng, Strategy::Closing, 600);
        if done {
            complete += 1;
            let value: Json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert!(value.is_object(), "{text}");
        }
    }
    assert!(complete >= 20, "only {complete} of 40 completed");
}

#[test]
fn regex_and_lark_outputs_match() {
    let (t, v) = vocabulary();
    let mut rng = Rng(3);
    let re = v.compile(&Format::Regex("[0-9]{3}-(ab|cd)+".into())).unwrap();
    let lark = v
        .compile(&Format::Lark(
            "start: \"yes\" | \"no\" | \"maybe \" NUM\nNUM: /[0-9]{1,3}/".into(),
        ))
        .unwrap();
    for run in 0..40 {
        let strategy = [Strategy::Uniform, Strategy::Longest][run % 2];
        let (text, done) = walk(&re, &t, &mut rng, strategy, 100);
        if done {
            let (digits, rest) = text.split_at(4);
            assert!(
                digits[..3].bytes().all(|b| b.is_ascii_digit()) && digits.ends_with('-'),
                "{text}"
            );
            assert!(!rest.is_empty() && rest.len() % 2 == 0, "{text}");
            assert!(
                rest.as_bytes().chunks(2).all(|p| p == b"ab" || p == b"cd"),
                "{text}"
            );
        }
        let (text, done) = walk(&lark, &t, &mut rng, strategy, 100);
        assert!(done, "{text}");
        let ok = text == "yes"
            || text == "no"
            || text
                .strip_prefix("maybe ")
                .is_some_and(|n| (1..=3).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()));
        assert!(ok, "{text:?}");
    }
}

#[test]
fn eos_is_allowed_exactly_when_complete() {
    let (t, v) = vocabulary();
    let id = |s: &str| t.token_to_id(&byte_level(s)).unwrap();
    let grammar = v
        .compile(&Format::JsonSchema {
            schema: json!({"type": "integer"}),
            strict: true,
        })
        .unwrap();
    let mut c = grammar.start();
    assert!(!c.mask().unwrap().allows(EOS) && !c.is_accepting());
    c.advance(id("12")).unwrap();
    // "12" is complete, and could go on ("123").
    assert!(c.mask().unwrap().allows(EOS) && c.mask().unwrap().allows(id("3")));
    assert!(c.is_accepting() && !c.must_stop());
    // Sampling EOS there ends it.
    let mut ended = c.clone();
    ended.advance(EOS).unwrap();
    assert!(ended.must_stop() && ended.is_accepting());
    let grammar = v.compile(&Format::Regex("ab".into())).unwrap();
    let mut c = grammar.start();
    c.advance(id("ab")).unwrap();
    assert!(c.must_stop() && c.is_accepting());
    let mask = c.mask().unwrap();
    assert!(mask.allows(EOS) && mask.count() == 1);
    // A token against the mask is the caller's bug.
    let mut c = grammar.start();
    c.mask().unwrap();
    let (code, message) = code_of(c.advance(id("12")));
    assert_eq!(code, Code::Internal);
    assert!(message.contains("against the output constraint"), "{message}");
}

/// The engine compiles on a worker and steps on its own thread.
#[test]
fn the_types_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Vocabulary>();
    send_sync::<Grammar>();
    send::<Constraint>();
}

#[test]
fn several_eos_tokens_all_end() {
    let t = test_tokenizer();
    let width = t.get_vocab_size(true);
    let v = Vocabulary::from_tokenizer(&t, &[EOS, 2], width).unwrap();
    let mut c = v.compile(&Format::Regex("a".into())).unwrap().start();
    c.advance(t.token_to_id("a").unwrap()).unwrap();
    let mask = c.mask().unwrap();
    assert!(mask.allows(EOS) && mask.allows(2) && mask.count() == 2);
    let (code, message) = code_of(Vocabulary::from_tokenizer(&t, &[], width));
    assert_eq!(code, Code::InvalidArg);
    assert!(message.contains("no end-of-sequence token"), "{message}");
    let (code, _) = code_of(Vocabulary::from_tokenizer(&t, &[EOS], width - 1));
    assert_eq!(code, Code::InvalidArg);
}

#[test]
fn response_format_shapes() {
    let f = |v: Json| Format::from_json(&v);
    assert_eq!(f(json!({"type": "text"})).unwrap(), None);
    assert_eq!(
        f(json!({"type": "json_object"})).unwrap(),
        Some(Format::JsonObject)
    );
    let schema = json!({"type": "object"});
    let want = Some(Format::JsonSchema {
        schema: schema.clone(),
        strict: true,
    });
    assert_eq!(f(json!({"type": "json_schema", "schema": schema})).unwrap(), want);
    let openai =
        json!({"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": false}});
    assert_eq!(
        f(openai).unwrap(),
        Some(Format::JsonSchema {
            schema: schema.clone(),
            strict: false
        })
    );
    assert_eq!(
        f(json!({"type": "regex", "pattern": "a+"})).unwrap(),
        Some(Format::Regex("a+".into()))
    );
    assert_eq!(
        f(json!({"type": "grammar", "grammar": "start: \"a\""})).unwrap(),
        Some(Format::Lark("start: \"a\"".into()))
    );
    for (bad, says) in [
        (json!("json"), "responseFormat must be an object"),
        (json!({"type": "xml"}), "responseFormat.type must be"),
        (
            json!({"type": "json_object", "schema": {}}),
            "unknown key 'schema'",
        ),
        (json!({"type": "json_schema"}), "responseFormat.schema is missing"),
        (
            json!({"type": "json_schema", "schema": "x"}),
            "responseFormat.schema must be a JSON Schema",
        ),
        (
            json!({"type": "json_schema", "json_schema": {"schema": {}, "strict": 1}}),
            "responseFormat.json_schema.strict must be a boolean",
        ),
        (
            json!({"type": "json_schema", "json_schema": {"schema": {}, "extra": 1}}),
            "responseFormat.json_schema: unknown key 'extra'",
        ),
        (
            json!({"type": "regex", "pattern": 5}),
            "responseFormat.pattern must be a string",
        ),
    ] {
        let (code, message) = code_of(f(bad.clone()));
        assert_eq!(code, Code::InvalidArg, "{bad}");
        assert!(message.contains(says), "{bad}: {message}");
    }
}

#[test]
fn strict_false_ignores_what_cannot_be_enforced() {
    let (_, v) = vocabulary();
    // uniqueItems is JSON Schema llguidance does not enforce (keywords JSON Schema does not
    // know are annotations, accepted either way).
    let schema = json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true, "x-note": 1});
    let strict = v.compile(&Format::JsonSchema {
        schema: schema.clone(),
        strict: true,
    });
    let (code, message) = code_of(strict);
    assert_eq!(code, Code::InvalidArg);
    assert!(
        message.starts_with("responseFormat.schema: ") && message.contains("uniqueItems"),
        "{message}"
    );
    v.compile(&Format::JsonSchema {
        schema,
        strict: false,
    })
    .unwrap();
}

/// A schema that is not JSON Schema, a `$ref` cycle with no finite instance, sizes over the
/// limit: InvalidArg naming the part, in well under a second each.
#[test]
fn hostile_inputs_fail_fast_with_invalid_arg() {
    let (_, v) = vocabulary();
    let mut big = serde_json::Map::new();
    for i in 0..60_000 {
        big.insert(
            format!("property_number_{i}"),
            json!({"type": "string", "description": "x"}),
        );
    }
    let big = json!({"type": "object", "properties": big});
    let mut wide = serde_json::Map::new();
    for i in 0..14_000 {
        wide.insert(format!("p{i}"), json!({"enum": [format!("value {i}"), i]}));
    }
    let wide = json!({"type": "object", "properties": wide, "required": ["p0"]});
    let deep = (0..200).fold(
        json!({"type": "integer"}),
        |s, _| json!({"type": "array", "items": s}),
    );
    let cases: Vec<(&str, Format, &str)> = vec![
        (
            "type is a number",
            Format::JsonSchema {
                schema: json!({"type": 42}),
                strict: true,
            },
            "responseFormat.schema",
        ),
        (
            "properties is a string",
            Format::JsonSchema {
                schema: json!({"type": "object", "properties": "a"}),
                strict: true,
            },
            "responseFormat.schema",
        ),
        (
            "required is not a list",
            Format::JsonSchema {
                schema: json!({"type": "object", "required": "a"}),
                strict: true,
            },
            "responseFormat.schema",
        ),
        (
            "false schema",
            Format::JsonSchema {
                schema: json!(false),
                strict: true,
            },
            "no value satisfies it",
        ),
        (
            "$ref to itself",
            Format::JsonSchema {
                schema: json!({"$ref": "#"}),
                strict: true,
            },
            "responseFormat.schema",
        ),
        (
            "required $ref cycle",
            Format::JsonSchema {
                schema: json!({"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/a"}}, "required": ["b"]}}, "$ref": "#/$defs/a"}),
                strict: true,
            },
            "responseFormat.schema",
        ),
        (
            "unknown $ref",
            Format::JsonSchema {
                schema: json!({"$ref": "#/$defs/nothing"}),
                strict: true,
            },
            "responseFormat.schema",
        ),
        (
            "remote $ref",
            Format::JsonSchema {
                schema: json!({"$ref": "https://example.com/s.json"}),
                strict: true,
            },
            "responseFormat.schema",
        ),
        (
            "x-guidance",
            Format::JsonSchema {
                schema: json!({"x-guidance": {"lenient": true}}),
                strict: true,
            },
            "'x-guidance' is not accepted",
        ),
        (
            "unsatisfiable",
            Format::JsonSchema {
                schema: json!({"type": "integer", "minimum": 5, "maximum": 1}),
                strict: true,
            },
            "responseFormat.schema",
        ),
        (
            "multi-megabyte",
            Format::JsonSchema {
                schema: big,
                strict: true,
            },
            "over the limit",
        ),
        (
            "14,000 properties under the byte limit",
            Format::JsonSchema {
                schema: wide,
                strict: true,
            },
            "42003 subschemas and enum values is over the limit of 10000",
        ),
        (
            "6,000 properties",
            Format::JsonSchema {
                schema: one_object(6_000),
                strict: true,
            },
            "6000 properties is over the limit of 5000",
        ),
        (
            "1,500 properties in one object",
            Format::JsonSchema {
                schema: one_object(1_500),
                strict: true,
            },
            "an object with 1500 properties",
        ),
        (
            "200 levels",
            Format::JsonSchema {
                schema: deep,
                strict: true,
            },
            "nested deeper than 128 levels",
        ),
        (
            "20,000 enum values",
            Format::JsonSchema {
                schema: json!({"enum": (0..20_000).collect::<Vec<_>>()}),
                strict: true,
            },
            "20002 subschemas and enum values",
        ),
        ("bad regex", Format::Regex("(a".into()), "responseFormat.pattern"),
        (
            "Lark embedding a $ref cycle",
            Format::Lark(format!(
                "start: \"x\" v\nv: %json {}",
                json!({"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/a"}}, "required": ["b"]}}, "$ref": "#/$defs/a"})
            )),
            "responseFormat.grammar: no finite value satisfies it",
        ),
        (
            "Lark embedding 500 properties",
            Format::Lark(format!("start: %json {}", one_object(500))),
            "responseFormat.grammar: an object with 500 properties",
        ),
        (
            "not Lark",
            Format::Lark("start: (".into()),
            "responseFormat.grammar",
        ),
        (
            "no start",
            Format::Lark("x: \"a\"".into()),
            "responseFormat.grammar",
        ),
        (
            "empty language",
            Format::Lark("start: a\na: a \"x\"".into()),
            "responseFormat.grammar",
        ),
    ];
    for (what, format, says) in cases {
        let t0 = Instant::now();
        let r = v.compile(&format);
        let took = t0.elapsed();
        let Err(e) = r else {
            panic!("{what}: compiled");
        };
        let (code, message) = describe(&e);
        eprintln!("{what}: {:.1} ms: {message}", took.as_secs_f64() * 1e3);
        assert_eq!(code, Code::InvalidArg, "{what}: {message}");
        assert!(message.contains(says), "{what}: {message}");
        // Generous: a hang or a minutes-long compile is what this catches, not a slow machine.
        assert!(took.as_secs() < 10, "{what} took {took:?}");
    }
}

fn one_object(n: usize) -> Json {
    let properties: serde_json::Map<String, Json> = (0..n)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    json!({"type": "object", "properties": properties})
}

/// At the limits, a schema compiles (on its own stack, whatever the caller's: llguidance
/// recurses per property) in about a second at most.
#[test]
fn the_largest_schemas_compile_on_a_small_stack() {
    let (t, v) = vocabulary();
    let open = t.token_to_id(&byte_level("{\"")).unwrap();
    let t0 = Instant::now();
    let stepped = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let schema = one_object(schema::MAX_OBJECT_PROPERTIES);
            let mut c = v.compile(&Format::JsonSchema { schema, strict: true })?.start();
            // After `{"` the parser's row holds every optional property: the widest it gets.
            c.advance(open)?;
            c.mask().map(|m| m.count())
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(stepped.unwrap() > 0);
    eprintln!(
        "400 optional properties: {:.0} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
}

/// An ambiguous grammar costs more with every token: it ends with InvalidArg (its time budget,
/// or llguidance's row limit), never holds the step for long.
#[test]
fn an_ambiguous_grammar_ends_with_invalid_arg() {
    let (t, v) = vocabulary();
    let a = t.token_to_id("a").unwrap();
    let grammar = v
        .compile(&Format::Lark("start: x+\nx: \"a\" | x x | x x x".into()))
        .unwrap();
    let mut c = grammar.start().with_budget(Duration::from_millis(50));
    let failed = (0..1000).find_map(|_| c.compute_mask().and_then(|_| c.advance(a)).err());
    let (code, message) = describe(&failed.expect("it never failed"));
    assert_eq!(code, Code::InvalidArg);
    assert!(message.starts_with("the output constraint"), "{message}");
    // Once spent, it stays spent.
    let (code, _) = code_of(c.compute_mask());
    assert_eq!(code, Code::InvalidArg);
}

#[test]
fn tool_calls_name_a_tool_and_validate_its_arguments() {
    let (t, v) = vocabulary();
    let tools = Tool::list_from_json(&json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"enum": ["Paris", "Tokyo"]}, "days": {"type": "integer", "minimum": 1, "maximum": 9}},
            "required": ["city"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "now"}}
    ]))
    .unwrap();
    let format = ToolCallFormat::named("hermes").unwrap();
    let mut rng = Rng(5);
    for (choice, parallel) in [
        (ToolChoice::Required, true),
        (ToolChoice::Required, false),
        (ToolChoice::Function("get_weather".into()), true),
    ] {
        let grammar = v
            .compile(&Format::ToolCalls {
                tools: tools.clone(),
                choice: choice.clone(),
                format: format.clone(),
                parallel,
            })
            .unwrap();
        let mut complete = 0;
        for run in 0..30 {
            let strategy = [Strategy::Uniform, Strategy::Longest, Strategy::Closing][run % 3];
            let (text, done) = walk(&grammar, &t, &mut rng, strategy, 300);
            if !done {
                continue;
            }
            complete += 1;
            let calls: Vec<&str> = text.split('\n').collect();
            assert!(
                calls.len().is_multiple_of(3) && (parallel || calls.len() == 3),
                "{text:?}"
            );
            for call in calls.chunks(3) {
                assert_eq!(call[0], "<tool_call>", "{text:?}");
                assert_eq!(call[2], "</tool_call>", "{text:?}");
                let value: Json = serde_json::from_str(call[1]).unwrap_or_else(|e| panic!("{text:?}: {e}"));
                let tool = tools
                    .iter()
                    .find(|t| value["name"] == t.name.as_str())
                    .expect("a tool's name");
                if let ToolChoice::Function(name) = &choice {
                    assert_eq!(&tool.name, name);
                }
                let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["name", "arguments"], "{text}");
                assert!(
                    valid(&value["arguments"], &tool.parameters, &tool.parameters),
                    "{text}"
                );
            }
        }
        assert!(complete >= 15, "{choice:?}: only {complete} of 30 completed");
    }
    // The wrappers are special tokens here: the grammar asks for them as tokens.
    let mut c = v
        .compile(&Format::ToolCalls {
            tools: tools.clone(),
            choice: ToolChoice::Required,
            format: format.clone(),
            parallel: false,
        })
        .unwrap()
        .start();
    let mask = c.mask().unwrap();
    assert!(mask.allows(1) && mask.count() == 1, "only <tool_call>");
    // Errors name the part.
    for (choice, says) in [
        (
            ToolChoice::Function("nope".into()),
            "toolChoice: no tool is named 'nope'",
        ),
        (ToolChoice::Auto, "not enforced by a grammar"),
        (ToolChoice::None, "not enforced by a grammar"),
    ] {
        let (code, message) = code_of(v.compile(&Format::ToolCalls {
            tools: tools.clone(),
            choice,
            format: format.clone(),
            parallel: true,
        }));
        assert_eq!(code, Code::InvalidArg);
        assert!(message.contains(says), "{message}");
    }
    let bad = Tool::list_from_json(
        &json!([{"type": "function", "function": {"name": "f", "parameters": {"type": 3}}}]),
    )
    .unwrap();
    let (code, message) = code_of(v.compile(&Format::ToolCalls {
        tools: bad,
        choice: ToolChoice::Required,
        format,
        parallel: true,
    }));
    assert_eq!(code, Code::InvalidArg);
    assert!(message.starts_with("responseFormat.tools: "), "{message}");
}

/// Mistral's list and Llama 3's bare object: the same calls in other strings.
#[test]
fn other_tool_call_formats() {
    let (t, v) = vocabulary();
    let tools = Tool::list_from_json(&json!([
        {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
            "additionalProperties": false}}}
    ]))
    .unwrap();
    let mut rng = Rng(23);
    for (format, key) in [
        (ToolCallFormat::named("mistral").unwrap(), "arguments"),
        (ToolCallFormat::named("llama3").unwrap(), "parameters"),
    ] {
        let grammar = v
            .compile(&Format::ToolCalls {
                tools: tools.clone(),
                choice: ToolChoice::Required,
                format: format.clone(),
                parallel: true,
            })
            .unwrap();
        let mut complete = 0;
        for run in 0..20 {
            let strategy = [Strategy::Uniform, Strategy::Longest, Strategy::Closing][run % 3];
            let (text, done) = walk(&grammar, &t, &mut rng, strategy, 300);
            if !done {
                continue;
            }
            complete += 1;
            let body = text
                .strip_prefix(format.begin.as_str())
                .unwrap_or_else(|| panic!("{text:?}"));
            let calls: Vec<Json> = if format.begin.is_empty() {
                vec![serde_json::from_str(body).unwrap_or_else(|e| panic!("{text:?}: {e}"))]
            } else {
                serde_json::from_str(&format!("[{body}")).unwrap_or_else(|e| panic!("{text:?}: {e}"))
            };
            for call in calls {
                assert_eq!(call["name"], "add", "{text}");
                assert!(
                    valid(&call[key], &tools[0].parameters, &tools[0].parameters),
                    "{text}"
                );
            }
        }
        assert!(complete >= 10, "{format:?}: only {complete} of 20 completed");
    }
}

#[test]
fn tool_and_choice_shapes() {
    let (code, message) = code_of(Tool::list_from_json(
        &json!([{"type": "function", "function": {"name": ""}}]),
    ));
    assert_eq!(code, Code::InvalidArg);
    assert!(message.contains("tools[0].function.name"), "{message}");
    let (_, message) = code_of(Tool::list_from_json(&json!([
        {"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}])));
    assert!(message.contains("tools[1]: a second tool named 'a'"), "{message}");
    let (_, message) = code_of(Tool::list_from_json(&json!([{"type": "web"}])));
    assert!(message.contains("tools[0].type must be 'function'"), "{message}");
    assert_eq!(
        ToolChoice::from_json(&json!("required")).unwrap(),
        ToolChoice::Required
    );
    assert_eq!(
        ToolChoice::from_json(&json!({"type": "function", "function": {"name": "f"}})).unwrap(),
        ToolChoice::Function("f".into())
    );
    let (code, _) = code_of(ToolChoice::from_json(&json!("always")));
    assert_eq!(code, Code::InvalidArg);
}

/// A SentencePiece-style tokenizer (byte fallback, `▁` for spaces): bytes from `<0xAB>`.
#[test]
fn byte_fallback_tokenizers_spell_bytes() {
    let mut vocab = serde_json::Map::new();
    vocab.insert("<unk>".into(), json!(0));
    vocab.insert("</s>".into(), json!(1));
    for b in 0..=255u32 {
        vocab.insert(format!("<0x{b:02X}>"), json!(2 + b));
    }
    for w in ["▁", "▁{", "\"", "a", "b", "}", ":", "▁\""] {
        let id = vocab.len();
        vocab.insert(w.into(), json!(id));
    }
    let json = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [
            {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
            {"id": 1, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null, "pre_tokenizer": null, "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
            "vocab": vocab, "merges": []}
    });
    let t = tokenizers::Tokenizer::from_bytes(serde_json::to_vec(&json).unwrap()).unwrap();
    let v = Vocabulary::from_tokenizer(&t, &[1], t.get_vocab_size(true)).unwrap();
    let mut c = v.compile(&Format::Regex("\\{ ab\\}".into())).unwrap().start();
    let mask = c.mask().unwrap();
    // '{' as the byte token <0x7B>; "▁{" starts with a space, so it is not allowed first.
    assert!(mask.allows(t.token_to_id("<0x7B>").unwrap()));
    assert!(!mask.allows(t.token_to_id("▁{").unwrap()));
    c.advance(t.token_to_id("<0x7B>").unwrap()).unwrap();
    assert!(c.mask().unwrap().allows(t.token_to_id("▁").unwrap()));
    assert!(c.mask().unwrap().allows(t.token_to_id("<0x20>").unwrap()));
}

/// The real tiny LM tokenizer (models/make_lm_models.py) when the models are generated.
#[test]
fn golden_lm_tokenizer_walks_validate() {
    let path = format!("{}/models/golden/lm/tokenizer/tokenizer.json", crate::REPO_ROOT);
    let Ok(json) = std::fs::read(&path) else {
        eprintln!("skipped: {path} (npm run models)");
        return;
    };
    let t = tokenizers::Tokenizer::from_bytes(&json).unwrap();
    let eos = t.token_to_id("<|im_end|>").unwrap();
    let v = Vocabulary::from_tokenizer_json(&json, &[eos], t.get_vocab_size(true)).unwrap();
    let mut rng = Rng(13);
    let schema = &schemas()[0];
    let grammar = v
        .compile(&Format::JsonSchema {
            schema: schema.clone(),
            strict: true,
        })
        .unwrap();
    let mut complete = 0;
    for run in 0..30 {
        let strategy = [Strategy::Uniform, Strategy::Longest, Strategy::Closing][run % 3];
        let mut c = grammar.start();
        let mut ids = Vec::new();
        let mut done = false;
        for _ in 0..400 {
            if c.must_stop() {
                done = true;
                break;
            }
            let mask = c.mask().unwrap().clone();
            let allowed: Vec<u32> = (0..v.width() as u32).filter(|&i| mask.allows(i)).collect();
            let text_of = |id: u32| t.decode(&[id], false).unwrap_or_default();
            let pick = match strategy {
                Strategy::Longest => *allowed
                    .iter()
                    .max_by_key(|&&i| (text_of(i).len(), rng.below(99)))
                    .unwrap(),
                _ => allowed[rng.below(allowed.len())],
            };
            if pick == eos {
                done = true;
                break;
            }
            c.advance(pick).unwrap();
            ids.push(pick);
        }
        if done {
            complete += 1;
            let text = t.decode(&ids, false).unwrap();
            let value: Json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert!(valid(&value, schema, schema), "{text}");
        }
    }
    assert!(complete >= 10, "only {complete} of 30 completed");
}

/// Every tokenizer of the generated tiny models (byte-level BPEs, SentencePiece conversions with
/// byte fallback): the vocabulary builds, and walks give valid JSON.
#[test]
fn every_generated_lm_tokenizer_works() {
    let root = format!("{}/models/golden/lm", crate::REPO_ROOT);
    let Ok(dirs) = std::fs::read_dir(&root) else {
        eprintln!("skipped: {root} (npm run models)");
        return;
    };
    let schema = json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
        "n": {"type": "integer"}}, "required": ["name", "n"], "additionalProperties": false});
    let mut rng = Rng(17);
    let (mut walks, mut complete) = (0, 0);
    for dir in dirs.flatten() {
        let path = dir.path().join("tokenizer.json");
        let Ok(json) = std::fs::read(&path) else { continue };
        let t = tokenizers::Tokenizer::from_bytes(&json).unwrap();
        let v = Vocabulary::from_tokenizer_json(&json, &[0], t.get_vocab_size(true))
            .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        let grammar = v
            .compile(&Format::JsonSchema {
                schema: schema.clone(),
                strict: true,
            })
            .unwrap();
        for _ in 0..5 {
            let mut c = grammar.start();
            let mut ids = Vec::new();
            while !c.must_stop() && ids.len() < 300 {
                let mask = c.mask().unwrap().clone();
                let allowed: Vec<u32> = (1..v.width() as u32).filter(|&i| mask.allows(i)).collect();
                if allowed.is_empty() {
                    break;
                }
                let pick = allowed[rng.below(allowed.len())];
                c.advance(pick).unwrap();
                ids.push(pick);
            }
            walks += 1;
            if c.must_stop() {
                complete += 1;
                let text = t.decode(&ids, false).unwrap();
                let value: Json = serde_json::from_str(text.trim_start())
                    .unwrap_or_else(|e| panic!("{}: {text:?}: {e}", path.display()));
                assert!(valid(&value, &schema, &schema), "{}: {text}", path.display());
            }
        }
    }
    eprintln!("{complete} of {walks} walks complete");
    assert!(complete * 2 >= walks, "{complete} of {walks} walks complete");
}

/// The mask's cost per token at a real vocabulary (SmolLM2's, 49,152 tokens, when the
/// tokenizer goldens are generated): `cargo test --release -p torch-node-core mask_cost --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn mask_cost() {
    let path = std::env::var("MASK_COST_TOKENIZER").unwrap_or_else(|_| {
        format!(
            "{}/models/golden/tokenizers/smollm2/tokenizer.json",
            crate::REPO_ROOT
        )
    });
    let json = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let t = tokenizers::Tokenizer::from_bytes(&json).unwrap();
    let eos = t
        .token_to_id("<|im_end|>")
        .or_else(|| t.token_to_id("<|endoftext|>"))
        .unwrap();
    let t0 = Instant::now();
    let v = Vocabulary::from_tokenizer_json(&json, &[eos], t.get_vocab_size(true)).unwrap();
    eprintln!(
        "vocabulary of {}: {:.1} ms",
        v.width(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    let schema = &schemas()[0];
    let t0 = Instant::now();
    let grammar = v
        .compile(&Format::JsonSchema {
            schema: schema.clone(),
            strict: true,
        })
        .unwrap();
    eprintln!("compile: {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
    let mut rng = Rng(1);
    let (mut masks, mut mask_time, mut apply_time, mut slowest) = (0usize, 0f64, 0f64, 0f64);
    let mut logits = vec![0.0f32; v.width()];
    for _ in 0..20 {
        let mut c = grammar.start();
        for _ in 0..200 {
            if c.must_stop() {
                break;
            }
            let t0 = Instant::now();
            c.compute_mask().unwrap();
            let took = t0.elapsed().as_secs_f64();
            mask_time += took;
            slowest = slowest.max(took);
            let t0 = Instant::now();
            c.apply(&mut logits).unwrap();
            apply_time += t0.elapsed().as_secs_f64();
            masks += 1;
            let mask = c.mask().unwrap();
            let allowed: Vec<u32> = (0..v.width() as u32).filter(|&i| mask.allows(i)).collect();
            let pick = allowed[rng.below(allowed.len())];
            if pick == eos {
                break;
            }
            c.advance(pick).unwrap();
        }
    }
    eprintln!(
        "{masks} masks: compute {:.1} us/token (slowest {:.0} us), apply {:.1} us/token (V = {})",
        mask_time / masks as f64 * 1e6,
        slowest * 1e6,
        apply_time / masks as f64 * 1e6,
        v.width()
    );
}

/// The longest run of digits outside JSON strings.
fn longest_digit_run(text: &str) -> usize {
    let (mut in_string, mut escaped, mut run, mut longest) = (false, false, 0, 0);
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => (in_string, run) = (true, 0),
            '0'..='9' => run += 1,
            _ => run = 0,
        }
        longest = longest.max(run);
    }
    longest
}

/// llama.cpp's generic format: the whole answer is one JSON object, calls or (with `auto`) a
/// text answer, from the same table as the other formats.
#[test]
fn generic_tool_calls_are_one_json_object() {
    let (t, v) = vocabulary();
    let tools = Tool::list_from_json(&json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"enum": ["Paris", "Tokyo"]}, "days": {"type": "integer"}},
            "required": ["city", "days"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "now"}}
    ]))
    .unwrap();
    let format = ToolCallFormat::named("generic").unwrap();
    let mut rng = Rng(77);
    for (choice, parallel) in [
        (ToolChoice::Required, true),
        (ToolChoice::Required, false),
        (ToolChoice::Function("get_weather".into()), true),
        (ToolChoice::Auto, false),
        (ToolChoice::Auto, true),
    ] {
        let grammar = v
            .compile(&Format::ToolCalls {
                tools: tools.clone(),
                choice: choice.clone(),
                format: format.clone(),
                parallel,
            })
            .unwrap();
        let (mut complete, mut replies) = (0, 0);
        for run in 0..40 {
            let strategy = [
                Strategy::Uniform,
                Strategy::Longest,
                Strategy::Closing,
                Strategy::Digits,
            ][run % 4];
            let (text, done) = walk(&grammar, &t, &mut rng, strategy, 300);
            assert!(longest_digit_run(&text) <= MAX_DIGITS, "{text}");
            if !done {
                continue;
            }
            complete += 1;
            let value: Json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
            let many = parallel && !matches!(choice, ToolChoice::Function(_));
            let calls: Vec<&Json> = match keys[..] {
                [k] if k == "tool_calls" && many => value[k].as_array().unwrap().iter().collect(),
                [k] if k == "tool_call" && !many => vec![&value[k]],
                [k] if k == "response" && choice == ToolChoice::Auto => {
                    assert!(value[k].is_string(), "{text}");
                    replies += 1;
                    continue;
                }
                _ => panic!("{choice:?}, parallel {parallel}: {text}"),
            };
            assert!(!calls.is_empty(), "{text}");
            for call in calls {
                let tool = tools
                    .iter()
                    .find(|t| call["name"] == t.name.as_str())
                    .expect("a tool's name");
                if let ToolChoice::Function(name) = &choice {
                    assert_eq!(&tool.name, name);
                }
                assert!(
                    valid(&call["arguments"], &tool.parameters, &tool.parameters),
                    "{text}"
                );
            }
        }
        assert!(complete >= 20, "{choice:?}: only {complete} of 40 completed");
        if choice == ToolChoice::Auto {
            assert!(
                replies > 0 && replies < complete,
                "{choice:?}: {replies} text answers of {complete}"
            );
        }
    }
    // A format without a text answer refuses auto; the table names its formats.
    let (code, message) = code_of(Format::from_json(&json!({"type": "tool_calls",
        "tools": [{"type": "function", "function": {"name": "f"}}], "toolChoice": "auto", "format": "hermes"})));
    assert_eq!(code, Code::InvalidArg);
    assert!(message.contains("or 'auto' with format 'generic'"), "{message}");
    let (_, message) = code_of(ToolCallFormat::named("xml"));
    assert!(
        message.contains("'hermes', 'llama3', 'mistral', 'generic', got 'xml'"),
        "{message}"
    );
}

/// JSON numbers: at most MAX_DIGITS digits in a row, however hard the walk pushes for more;
/// the grammar still wins where it wants more digits than that.
#[test]
fn numbers_have_a_bounded_number_of_digits() {
    let (t, v) = vocabulary();
    let schema = json!({"type": "object", "properties": {"celsius": {"type": "number"},
        "age": {"type": "integer"}, "list": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
        "code": {"type": "string", "maxLength": 40}},
        "required": ["celsius", "age", "list", "code"], "additionalProperties": false});
    let mut rng = Rng(9);
    let grammar = v
        .compile(&Format::JsonSchema {
            schema: schema.clone(),
            strict: true,
        })
        .unwrap();
    let mut longest = 0;
    for _ in 0..12 {
        let (text, done) = walk(&grammar, &t, &mut rng, Strategy::Digits, 800);
        assert!(done, "unbounded: {text}");
        let value: Json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(valid(&value, &schema, &schema), "{text}");
        let run = longest_digit_run(&text);
        assert!(run <= MAX_DIGITS, "{run} digits in a row: {text}");
        longest = longest.max(run);
    }
    assert_eq!(longest, MAX_DIGITS, "the walk pushes numbers to the bound");
    for format in [Format::JsonObject] {
        let grammar = v.compile(&format).unwrap();
        for _ in 0..6 {
            let (text, _) = walk(&grammar, &t, &mut rng, Strategy::Digits, 200);
            assert!(longest_digit_run(&text) <= MAX_DIGITS, "{text}");
        }
    }
    // 18 digits at least: the grammar wins over the bound, and the walk still ends.
    let big = json!({"type": "integer", "minimum": 100_000_000_000_000_000i64});
    let grammar = v
        .compile(&Format::JsonSchema {
            schema: big,
            strict: true,
        })
        .unwrap();
    let (text, done) = walk(&grammar, &t, &mut rng, Strategy::Closing, 100);
    assert!(done && text.len() >= 18, "{text}");
    // A regex says itself how many digits it wants: no bound.
    let grammar = v.compile(&Format::Regex("[0-9]{20}".into())).unwrap();
    let (text, done) = walk(&grammar, &t, &mut rng, Strategy::Digits, 100);
    assert!(done && text.len() == 20, "{text}");
}
