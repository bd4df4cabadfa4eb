//! Shared libraries of custom ops: `torch.loadLibrary(path)`, the analogue of Python's
//! `torch.ops.load_library`, and torchvision's ops without Python. Loading a library runs its
//! `TORCH_LIBRARY` registrations; its ops then resolve in every TorchScript module loaded later.
use crate::error::bail_code;
use crate::error::{fail, trim_libtorch, Code};
use crate::ffi;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Canonical paths of the libraries loaded so far (never unloaded: ops registered by a library
/// point into its code).
static LOADED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The empty stand-in for `libtorch_python.so` (src/shim/torch_python_stub.c), built by build.rs.
const PYTHON_STUB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libtorch_python_stub.so"));

/// Loads a library into the process once (by canonical path); true when this call loaded it.
pub fn load(path: &str) -> Result<bool> {
    let what = format!("loadLibrary: cannot load '{path}'");
    let canonical =
        std::fs::canonicalize(path).map_err(|e| fail(Code::LibraryLoadError, format!("{what}: {e}")))?;
    if !canonical.is_file() {
        bail_code!(Code::LibraryLoadError, "{what}: not a file");
    }
    let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if loaded.contains(&canonical) {
        return Ok(false);
    }
    ffi::dlopen(&canonical).map_err(|e| {
        fail(
            Code::LibraryLoadError,
            format!("{what}: {}", trim_libtorch(&e.to_string())),
        )
    })?;
    loaded.push(canonical);
    Ok(true)
}

/// torchvision's folder beside the libtorch this process loaded (the PyPI wheels' layout:
/// `site-packages/{torch,torchvision}`; a cache entry: `<entry>/{torch,torchvision}`). Found at
/// run time, not recorded at build time: a prebuilt addon must not name the build machine's disk.
pub fn default_torchvision_dir() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let lib = libtorch_lib_dir(&maps).unwrap_or_else(|| PathBuf::from("libtorch/lib"));
    match lib.parent().and_then(Path::parent) {
        Some(root) => root.join("torchvision"),
        None => lib.join("../../torchvision"),
    }
}

/// The folder of the `libtorch_cpu.so` mapped into this process, from `/proc/self/maps`.
fn libtorch_lib_dir(maps: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.ends_with("/libtorch_cpu.so"))
        .and_then(|path| Path::new(path).parent().map(Path::to_path_buf))
}

/// Registers torchvision's ops (`nms`, `roi_align`, `deform_conv2d`, ...) from its wheel's
/// `_C.so`, which must match this libtorch's version (torchvision 0.N+15 for torch 2.N).
///
/// Why this works without Python: `_C.so` lists `libtorch_python.so` as a dependency but uses
/// none of its symbols. The stub is loaded first under that soname, so the dynamic loader takes it
/// as the dependency instead of the real library (which needs the Python interpreter).
pub fn load_torchvision(dir: &Path) -> Result<bool> {
    let what = format!(
        "vision.loadOps: cannot load torchvision's ops from '{}'",
        dir.display()
    );
    if !dir.is_dir() {
        bail_code!(
            Code::LibraryLoadError,
            "{what}: no such folder (a libtorch cache entry filled by an older torch-node has \
             none: run `npm rebuild torch-node`; with LIBTORCH, pass the folder of a \
             torchvision 0.28 package)"
        );
    }
    let version = std::fs::read_to_string(dir.join("version.py"))
        .map_err(|e| fail(Code::LibraryLoadError, format!("{what}: version.py: {e}")))?;
    let found = version
        .lines()
        .find_map(|l| l.strip_prefix("__version__ = '")?.split('\'').next())
        .unwrap_or("unknown")
        .to_string();
    let (major, minor) = ffi::torch_version();
    let expected = format!("0.{}.", minor + 15);
    if major != 2 || !found.starts_with(&expected) {
        bail_code!(
            Code::LibraryLoadError,
            "{what}: torchvision {found} does not match libtorch {major}.{minor} (needs torchvision {expected}x)"
        );
    }
    // `_C.so` has no RUNPATH (in Python, `import torch` has loaded its dependencies first):
    // the addon links libtorch.so for it (build.rs); the stub is loaded here.
    load(&python_stub()?.to_string_lossy())?;
    load(&dir.join("_C.so").to_string_lossy())
}

/// Writes the stub once per content into the temp folder (atomically) and returns its path.
fn python_stub() -> Result<PathBuf> {
    let hash = PYTHON_STUB.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    });
    let dir = std::env::temp_dir().join(format!("torch-node-{hash:016x}"));
    let path = dir.join("libtorch_python.so");
    if std::fs::read(&path).is_ok_and(|b| b == PYTHON_STUB) {
        return Ok(path);
    }
    let fail_io = |e: std::io::Error| {
        fail(
            Code::LibraryLoadError,
            format!("cannot write {}: {e}", path.display()),
        )
    };
    std::fs::create_dir_all(&dir).map_err(fail_io)?;
    let tmp = dir.join(format!("libtorch_python.so.{}.tmp", std::process::id()));
    std::fs::write(&tmp, PYTHON_STUB).map_err(fail_io)?;
    std::fs::rename(&tmp, &path).map_err(fail_io)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtorch_lib_dir_comes_from_the_mapped_libtorch_cpu() {
        let maps = "7f00-7f01 r-xp 00000000 fd:00 12 /usr/lib/libc.so.6\n\
                    7f02-7f03 r-xp 00000000 fd:00 13 /cache/libtorch-2.13.0-cpu/torch/lib/libtorch_cpu.so\n\
                    7f04-7f05 rw-p 00000000 00:00 0 \n";
        assert_eq!(
            libtorch_lib_dir(maps),
            Some(PathBuf::from("/cache/libtorch-2.13.0-cpu/torch/lib"))
        );
        assert_eq!(
            libtorch_lib_dir("7f00-7f01 r-xp 0 fd:00 1 /lib/libc.so.6\n"),
            None
        );
    }

    #[test]
    fn missing_and_non_library_files_are_library_load_errors() {
        let (code, msg) = crate::error::describe(&load("/nonexistent/libops.so").unwrap_err());
        assert_eq!(code, Code::LibraryLoadError);
        assert!(msg.contains("'/nonexistent/libops.so'"), "{msg}");
        let (code, msg) = crate::error::describe(&load(file!()).unwrap_err());
        assert_eq!(code, Code::LibraryLoadError);
        assert!(msg.contains("library.rs") && !msg.contains('\n'), "{msg}");
    }

    #[test]
    fn the_stub_is_written_once_and_loads() {
        let a = python_stub().unwrap();
        assert_eq!(python_stub().unwrap(), a);
        assert!(load(&a.to_string_lossy()).unwrap() || !load(&a.to_string_lossy()).unwrap());
        assert!(!load(&a.to_string_lossy()).unwrap(), "a second load is a no-op");
    }
}
