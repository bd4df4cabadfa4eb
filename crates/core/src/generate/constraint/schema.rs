//! Checks on a JSON schema before llguidance compiles it: its size, refs that stay inside it, and
//! a finite instance.
//!
//! Size: llguidance's compile time grows with the subschemas (about 0.3 ms each, AMD EPYC, 2
//! cores) and with the square of an object's optional properties, it recurses once per
//! property, and its parser refuses more than 2,000 items in a row (about four per optional
//! property, one per branch); so a schema has at most [`MAX_NODES`] subschemas and enum values,
//! [`MAX_PROPERTIES`] properties in all (OpenAI's own limit), [`MAX_OBJECT_PROPERTIES`] in one
//! object and [`MAX_BRANCHES`] in one `anyOf`: then a compile stays well under a second, and a
//! hostile schema is refused before it starts.
//!
//! Finite: a schema whose every instance is infinite is refused. llguidance compiles a
//! schema whose every instance is infinite (`{"$defs": {"a": {"type": "object", "properties":
//! {"b": {"$ref": "#/$defs/a"}}, "required": ["b"]}}, "$ref": "#/$defs/a"}`) into a grammar
//! that starts fine and never ends: the model would nest until `maxNewTokens`. This finds them
//! before compiling, as the least fixpoint of "some instance is finite" over the local refs.
//! It judges only the recursion: keywords it does not know count as satisfiable (llguidance
//! refuses what is unsatisfiable for other reasons).
use crate::error::{bail_code, Code};
use anyhow::Result;
use serde_json::Value as Json;
use std::collections::HashMap;

/// Deeper than this, a schema is refused (serde_json's parser stops at 128 levels).
pub const MAX_DEPTH: usize = 128;
/// The most subschemas (JSON objects) and enum values in a schema.
pub const MAX_NODES: usize = 10_000;
/// The most properties in a schema, all objects together (OpenAI's limit).
pub const MAX_PROPERTIES: usize = 5_000;
/// The most properties in one object: llguidance's parser holds about four items per optional
/// property in a row, and a row holds at most 2,000 (`ParserLimits::max_items_in_row`).
pub const MAX_OBJECT_PROPERTIES: usize = 400;
/// The most branches of one `anyOf` or `oneOf` (one parser item each, same row limit).
pub const MAX_BRANCHES: usize = 1_000;

/// What the walk over a schema finds.
#[derive(Default)]
struct Census {
    refs: Vec<String>,
    nodes: usize,
    properties: usize,
    too_deep: bool,
    /// An object with more than MAX_OBJECT_PROPERTIES, by its count.
    wide: Option<usize>,
    /// An anyOf/oneOf with more than MAX_BRANCHES, by its count.
    branches: Option<usize>,
}

/// InvalidArg naming the part when `schema` is over the limits, refers outside itself, or no
/// finite value satisfies it.
pub(super) fn check(schema: &Json, at: &str) -> Result<()> {
    limit(&[schema], at)?;
    finite(schema, at)
}

/// InvalidArg naming the part when `schemas`, together, are over the limits.
pub(super) fn limit(schemas: &[&Json], at: &str) -> Result<()> {
    let mut census = Census::default();
    for s in schemas {
        collect(s, &mut census, 0);
    }
    if census.too_deep {
        bail_code!(Code::InvalidArg, "{at}: nested deeper than {MAX_DEPTH} levels");
    }
    if census.nodes > MAX_NODES {
        bail_code!(
            Code::InvalidArg,
            "{at}: {} subschemas and enum values is over the limit of {MAX_NODES}",
            census.nodes
        );
    }
    if census.properties > MAX_PROPERTIES {
        bail_code!(
            Code::InvalidArg,
            "{at}: {} properties is over the limit of {MAX_PROPERTIES}",
            census.properties
        );
    }
    if let Some(n) = census.wide {
        bail_code!(
            Code::InvalidArg,
            "{at}: an object with {n} properties is over the limit of {MAX_OBJECT_PROPERTIES}"
        );
    }
    if let Some(n) = census.branches {
        bail_code!(
            Code::InvalidArg,
            "{at}: an anyOf or oneOf with {n} branches is over the limit of {MAX_BRANCHES}"
        );
    }
    Ok(())
}

/// InvalidArg when `schema` refers outside itself or no finite value satisfies it.
pub(super) fn finite(schema: &Json, at: &str) -> Result<()> {
    let mut census = Census::default();
    collect(schema, &mut census, 0);
    let mut refs = census.refs;
    if let Some(remote) = refs.iter().find(|r| !r.starts_with('#')) {
        bail_code!(
            Code::InvalidArg,
            "{at}: $ref '{remote}' is not in the schema (only local refs, '#/...', are followed)"
        );
    }
    refs.sort();
    refs.dedup();
    let mut finite: HashMap<&str, bool> = refs.iter().map(|r| (r.as_str(), false)).collect();
    // Each round makes at least one more ref finite, or stops.
    for _ in 0..=refs.len() {
        let mut changed = false;
        for r in &refs {
            if !finite[r.as_str()] && resolve(schema, r).is_none_or(|s| has_finite(s, &finite, 0)) {
                finite.insert(r, true);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if !has_finite(schema, &finite, 0) {
        let cycle: Vec<&str> = refs.iter().map(String::as_str).filter(|r| !finite[r]).collect();
        bail_code!(
            Code::InvalidArg,
            "{at}: no finite value satisfies it (every instance of '{}' contains another)",
            cycle.first().copied().unwrap_or("#")
        );
    }
    Ok(())
}

/// Every `$ref` under `s`, and the counts.
fn collect(s: &Json, out: &mut Census, depth: usize) {
    if depth > MAX_DEPTH {
        out.too_deep = true;
        return;
    }
    match s {
        Json::Object(o) => {
            out.nodes += 1;
            for (k, v) in o {
                match (k.as_str(), v) {
                    ("$ref", Json::String(r)) => out.refs.push(r.clone()),
                    ("properties", Json::Object(p)) => {
                        out.properties += p.len();
                        if p.len() > MAX_OBJECT_PROPERTIES {
                            out.wide = out.wide.max(Some(p.len()));
                        }
                        collect(v, out, depth + 1);
                    }
                    ("enum", Json::Array(e)) => out.nodes += e.len(),
                    ("anyOf" | "oneOf", Json::Array(b)) => {
                        if b.len() > MAX_BRANCHES {
                            out.branches = out.branches.max(Some(b.len()));
                        }
                        collect(v, out, depth + 1);
                    }
                    _ => collect(v, out, depth + 1),
                }
            }
        }
        Json::Array(a) => a.iter().for_each(|v| collect(v, out, depth + 1)),
        _ => {}
    }
}

/// A local ref's target (a JSON pointer after `#`).
fn resolve<'a>(root: &'a Json, r: &str) -> Option<&'a Json> {
    let pointer = r.strip_prefix('#')?;
    root.pointer(pointer)
}

/// Whether some finite value satisfies `s`, with `finite` saying so for each ref.
fn has_finite(s: &Json, finite: &HashMap<&str, bool>, depth: usize) -> bool {
    let Json::Object(o) = s else {
        return !matches!(s, Json::Bool(false));
    };
    if depth > MAX_DEPTH {
        return true;
    }
    let sub = |s: &Json| has_finite(s, finite, depth + 1);
    if let Some(Json::String(r)) = o.get("$ref") {
        if !finite.get(r.as_str()).copied().unwrap_or(true) {
            return false;
        }
    }
    if let Some(Json::Array(all)) = o.get("allOf") {
        if !all.iter().all(sub) {
            return false;
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Json::Array(any)) = o.get(key) {
            if !any.iter().any(sub) {
                return false;
            }
        }
    }
    if o.contains_key("const") || o.contains_key("enum") {
        return true;
    }
    let types: Vec<&str> = match o.get("type") {
        Some(Json::String(t)) => vec![t.as_str()],
        Some(Json::Array(ts)) => ts.iter().filter_map(Json::as_str).collect(),
        _ => vec!["null"],
    };
    types.iter().any(|&t| match t {
        "object" => {
            let required = o.get("required").and_then(Json::as_array);
            required
                .into_iter()
                .flatten()
                .filter_map(Json::as_str)
                .all(|name| match o.get("properties").and_then(|p| p.get(name)) {
                    Some(p) => sub(p),
                    None => o.get("additionalProperties").is_none_or(sub),
                })
        }
        "array" => {
            let min = o.get("minItems").and_then(Json::as_u64).unwrap_or(0) as usize;
            let prefix = o.get("prefixItems").and_then(Json::as_array);
            let prefix = prefix.map_or(&[][..], Vec::as_slice);
            prefix.iter().take(min).all(sub) && (min <= prefix.len() || o.get("items").is_none_or(sub))
        }
        _ => true,
    })
}

/// The JSON values after each `%json` of a Lark grammar (llguidance's embedded schemas). A
/// `%json` inside a string literal is read too: checking a value that is not a schema refuses
/// nothing a compile would accept, but the limits.
pub(super) fn embedded_in_lark(source: &str) -> Vec<Json> {
    source
        .match_indices("%json")
        .filter_map(|(i, _)| {
            let rest = source[i + "%json".len()..].trim_start();
            serde_json::Deserializer::from_str(rest)
                .into_iter::<Json>()
                .next()?
                .ok()
        })
        .collect()
}
