#![deny(clippy::all)]
//! torch-node's core: PyTorch's C++ runtime (libtorch, through `tch` and a small C++ shim) as safe
//! Rust, with no N-API. The addon (the `torch_node` crate at the repository root) is the glue that
//! reads JS arguments, calls in here and maps the errors; this crate does not depend on the N-API crates, so
//! the compiler keeps it that way, and `cargo test -p torch-node-core` runs with no Node.
//!
//! - `error`: codes, coded errors, libtorch's messages trimmed and classified;
//! - `dtype`, `device`, `args` (argument checks and limits), `repr` (how tensors print);
//! - `archive` (model-file validation), `torchscript` (a loaded TorchScript module), `aot`,
//!   `aot_inputs`, `aot_pages` (`.pt2` packages), `library` (custom-op libraries);
//! - `ivalue` (TorchScript values and method schemas), `image` (decode, transforms, encode),
//!   `text` (tokenizers, chat templates), `generate` (causal-LM generation);
//! - `cpu` (what an exported program's compiled code needs of the CPU);
//! - `memory` (live tensor accounting), `executor` (the threads libtorch compute runs on);
//! - `ffi`: every call into libtch and the C++ shim (`src/shim/`).
//!
//! See docs/architecture.md.
pub mod aot;
pub mod aot_extraction;
pub mod aot_inputs;
pub mod aot_pages;
pub mod archive;
pub mod args;
pub mod audio;
pub mod cgroup;
pub mod cpu;
pub mod device;
pub mod dtype;
pub mod error;
pub mod executor;
pub mod ffi;
pub mod generate;
pub mod image;
pub mod ivalue;
pub mod library;
pub mod memory;
pub mod repr;
pub mod text;
pub mod torchscript;

/// The repository's root, where the tests' fixtures are (`models/`): two levels above this crate.
#[cfg(test)]
pub(crate) const REPO_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
