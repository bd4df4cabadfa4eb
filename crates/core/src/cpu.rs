//! What an exported program's compiled code needs of the CPU, against the CPU it runs on.
//!
//! AOTInductor compiles a program's kernels for the vector ISA it picks on the export machine
//! (`torch._inductor.cpu_vec_isa.pick_vec_isa`, with gcc's `-mavx512f ...`): a package exported on
//! an AVX-512 CPU stops with SIGILL on an AVX2-only one, and nothing in the package says so. The
//! exporters record those flags in `manifest.json`'s `compiled_for`
//! (`python/export_causal_lm.py` `compiled_for`, with /proc/cpuinfo's names), and a load checks
//! them here first, refusing the folder in one line instead of dying in the first call.
use crate::error::{fail, Code};
use anyhow::Result;
use serde_json::Value as Json;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// The manifest's `compiled_for`: `{isa, cpu_flags, exported_on}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompiledFor {
    /// Inductor's name for the ISA (`avx2`, `avx512`, `avx512 avx512_vnni amx_tile`).
    pub isa: String,
    /// The /proc/cpuinfo flags the compiled code uses (`avx2`, `fma`, `f16c`, `avx512f`, ...).
    pub cpu_flags: Vec<String>,
    /// The export machine's CPU (its model name).
    pub exported_on: String,
}

impl CompiledFor {
    /// `manifest["compiled_for"]`; None where the manifest predates it (nothing to check).
    pub fn from_manifest(manifest: &Json) -> Option<CompiledFor> {
        let c = manifest.get("compiled_for")?;
        let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        let flags = c["cpu_flags"].as_array().into_iter().flatten();
        Some(CompiledFor {
            isa: text("isa"),
            cpu_flags: flags.filter_map(Json::as_str).map(str::to_string).collect(),
            exported_on: text("exported_on"),
        })
    }

    /// The flags the compiled code needs that `present` lacks (none where `present` is unknown:
    /// no /proc/cpuinfo to read).
    pub fn missing(&self, present: Option<&BTreeSet<String>>) -> Vec<&str> {
        let Some(present) = present else { return Vec::new() };
        let missing = self.cpu_flags.iter().filter(|f| !present.contains(f.as_str()));
        missing.map(String::as_str).collect()
    }

    /// `ModelLoadError` when this CPU lacks a flag the program was compiled for.
    pub fn check(&self, what: &str, present: Option<&BTreeSet<String>>) -> Result<()> {
        let missing = self.missing(present);
        if missing.is_empty() {
            return Ok(());
        }
        Err(fail(
            Code::ModelLoadError,
            format!(
                "{what} was compiled for {} (exported on {}) and this CPU lacks {}: export the model again on \
                 this machine (torch-node export)",
                self.isa,
                if self.exported_on.is_empty() { "another CPU" } else { &self.exported_on },
                missing.join(", ")
            ),
        ))
    }
}

/// The flags of the first CPU in a /proc/cpuinfo text.
pub fn parse_cpuinfo(text: &str) -> BTreeSet<String> {
    let line = text.lines().find(|l| l.starts_with("flags"));
    let flags = line.and_then(|l| l.split_once(':')).map(|(_, f)| f);
    flags
        .into_iter()
        .flat_map(str::split_whitespace)
        .map(str::to_string)
        .collect()
}

/// This CPU's flags from /proc/cpuinfo, read once; None where there is none to read.
pub fn flags() -> Option<&'static BTreeSet<String>> {
    static FLAGS: OnceLock<Option<BTreeSet<String>>> = OnceLock::new();
    FLAGS
        .get_or_init(|| {
            let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
            let flags = parse_cpuinfo(&text);
            (!flags.is_empty()).then_some(flags)
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZEN3: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7R13\n\
                        flags\t\t: fpu sse sse2 avx fma avx2 f16c bmi2\n\nprocessor\t: 1\nflags\t\t: fpu\n";

    fn avx512_program() -> CompiledFor {
        let manifest = serde_json::json!({"compiled_for": {
            "isa": "avx512", "exported_on": "AMD EPYC 9R14",
            "cpu_flags": ["avx512bw", "avx512dq", "avx512f", "avx512vl", "fma"]}});
        CompiledFor::from_manifest(&manifest).unwrap()
    }

    #[test]
    fn an_avx512_program_is_refused_on_an_avx2_cpu_naming_what_lacks() {
        let present = parse_cpuinfo(ZEN3);
        assert!(present.contains("avx2") && !present.contains("avx512f"));
        let program = avx512_program();
        assert_eq!(
            program.missing(Some(&present)),
            ["avx512bw", "avx512dq", "avx512f", "avx512vl"]
        );
        let e = program.check("model.pt2", Some(&present)).unwrap_err();
        let (code, message) = crate::error::describe(&e);
        assert_eq!(code, Code::ModelLoadError);
        assert!(message.starts_with("model.pt2 was compiled for avx512 (exported on AMD EPYC 9R14) and this CPU lacks avx512bw, avx512dq, avx512f, avx512vl"), "{message}");
    }

    #[test]
    fn a_program_runs_where_the_flags_are_there_or_unknown() {
        let avx2 = CompiledFor {
            isa: "avx2".into(),
            cpu_flags: vec!["avx2".into(), "f16c".into(), "fma".into()],
            exported_on: String::new(),
        };
        assert!(avx2.check("model.pt2", Some(&parse_cpuinfo(ZEN3))).is_ok());
        assert!(avx512_program().check("model.pt2", None).is_ok());
        assert_eq!(
            CompiledFor::from_manifest(&serde_json::json!({"kind": "causal-lm"})),
            None
        );
    }
}
