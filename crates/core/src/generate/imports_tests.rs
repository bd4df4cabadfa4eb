//! No import circle in the generation wing: reads the top-level `use` lines of every file under
//! `src/generate` (test modules inside a file are indented and left out), resolves each to the
//! wing's module it names, and fails on any circle, naming it.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The module a file is (`constraint/tools.rs` → `constraint::tools`, `constraint/mod.rs` →
/// `constraint`, `mod.rs` → ``).
fn module_of(relative: &str) -> String {
    let path = relative.trim_end_matches(".rs").trim_end_matches("mod");
    path.trim_end_matches('/').replace('/', "::")
}

fn join(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("::")
}

/// The top-level `use` statements of a file, each on one line.
fn use_statements(source: &str) -> Vec<String> {
    let (mut out, mut open): (Vec<String>, Option<String>) = (Vec::new(), None);
    for line in source.lines() {
        let starts = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "];
        if open.is_none() && starts.iter().any(|s| line.starts_with(s)) {
            open = Some(String::new());
        }
        if let Some(statement) = open.as_mut() {
            statement.push_str(line.trim());
            if line.trim_end().ends_with(';') {
                out.extend(open.take());
            }
        }
    }
    out
}

/// The wing's modules a `use` statement of `module` names (the longest known module prefix of
/// each path; a `{a, b}` group names each).
fn targets(module: &str, statement: &str, modules: &BTreeSet<String>) -> Vec<String> {
    let path = statement.split("use ").nth(1).unwrap_or("").trim_end_matches(';');
    let mut here: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    let rest = if let Some(r) = path.strip_prefix("crate::generate::") {
        here.clear();
        r
    } else if let Some(r) = path.strip_prefix("super::") {
        here.pop();
        r
    } else if let Some(r) = path.strip_prefix("self::") {
        r
    } else if modules.contains(&join(&[module, path.split("::").next().unwrap_or("")])) {
        path // a child module, named from its parent's mod.rs
    } else {
        return Vec::new(); // another crate, or the crate outside the wing
    };
    let (head, group) = match rest.find('{') {
        Some(i) => (&rest[..i], rest[i + 1..].trim_end_matches('}')),
        None => (rest, ""),
    };
    let mut paths = vec![head.trim_end_matches("::").to_string()];
    if !group.is_empty() {
        paths = (group.split(','))
            .map(|item| format!("{head}{}", item.trim()))
            .collect();
    }
    let mut found = Vec::new();
    for p in paths {
        let mut parts: Vec<&str> = here.clone();
        parts.extend(p.split("::").filter(|s| !s.is_empty()));
        while !parts.is_empty() && !modules.contains(&join(&parts)) {
            parts.pop();
        }
        let target = join(&parts);
        if target != module && (modules.contains(&target)) {
            found.push(target);
        }
    }
    found
}

/// The import graph of `files` (path relative to the wing's folder, source).
fn graph(files: &[(String, String)]) -> Graph {
    let modules: BTreeSet<String> = files.iter().map(|(p, _)| module_of(p)).collect();
    let mut g = Graph::new();
    for (path, source) in files {
        let module = module_of(path);
        let edges = g.entry(module.clone()).or_default();
        for statement in use_statements(source) {
            edges.extend(targets(&module, &statement, &modules));
        }
    }
    g
}

/// A circle of imports, as its modules in order (the first repeated at the end), if any.
fn circle(g: &Graph) -> Option<Vec<String>> {
    fn visit(g: &Graph, m: &str, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut found = path[at..].to_vec();
            found.push(m.to_string());
            return Some(found);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in g.get(m).into_iter().flatten() {
            if let Some(found) = visit(g, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys().find_map(|m| visit(g, m, &mut Vec::new(), &mut done))
}

fn read_wing(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            read_wing(&path, &format!("{prefix}{name}/"), out);
        } else if name.ends_with(".rs") {
            out.push((format!("{prefix}{name}"), std::fs::read_to_string(&path).unwrap()));
        }
    }
}

#[test]
fn the_generation_wing_has_no_import_circle() {
    let mut files = Vec::new();
    read_wing(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/generate"),
        "",
        &mut files,
    );
    let g = graph(&files);
    assert!(g.len() > 15, "read {} modules", g.len());
    assert!(g["batch"].contains("kv_cache") && g["constraint::tools"].contains("constraint::json_options"));
    if let Some(c) = circle(&g) {
        panic!("an import circle: {}", c.join(" → "));
    }
}

#[test]
fn a_circle_is_found_and_named() {
    let file = |p: &str, s: &str| (p.to_string(), s.to_string());
    let files = [
        file("mod.rs", "pub mod lm;\npub mod sequence;\n"),
        file("lm.rs", "use super::sequence::{Decoder, CacheShape};\n"),
        file(
            "sequence.rs",
            "use super::{\n    lm::Prompt,\n    x,\n};\n#[cfg(test)]\nmod t {\n    use super::*;\n}\n",
        ),
        file("c/mod.rs", "use format::Format;\n"),
        file("c/format.rs", "use super::tools::Tool;\nuse anyhow::Result;\n"),
        file("c/tools.rs", "use crate::generate::c::format::flag;\n"),
    ];
    let g = graph(&files);
    assert_eq!(g["c"], BTreeSet::from(["c::format".to_string()]));
    assert_eq!(circle(&g).unwrap(), ["c::format", "c::tools", "c::format"]);
    let without_c: Graph = g.into_iter().filter(|(m, _)| !m.starts_with('c')).collect();
    assert_eq!(circle(&without_c).unwrap(), ["lm", "sequence", "lm"]);
}
