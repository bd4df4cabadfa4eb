//! The process: CPU capabilities, oneDNN Graph fusion, `dlopen`, libtorch's version and
//! inter-op threads, and where its warnings go.
use super::{check_last_error, string_at, Callback};
use anyhow::{anyhow, Result};
use std::ffi::{c_char, c_int, c_void, CString};

extern "C" {
    fn tn_onednn_fusion(enabled: c_int, err: *mut *mut c_char);
    fn tn_cpu_capabilities(
        cb: extern "C" fn(*mut c_void, *const c_char, c_int, i64, *const c_char),
        ctx: *mut c_void,
        err: *mut *mut c_char,
    );
    fn tn_dlopen(path: *const c_char, err: *mut *mut c_char) -> *mut c_void;
    fn tn_torch_version(major: *mut c_int, minor: *mut c_int);
    fn tn_forward_warnings(cb: extern "C" fn(*const c_char, c_int));
}

/// Where libtorch's warnings go: (message, whether it is a deprecation). Set once.
static ON_WARNING: std::sync::OnceLock<fn(String, bool)> = std::sync::OnceLock::new();

extern "C" fn warning_trampoline(message: *const c_char, deprecation: c_int) {
    // Called from C++: nothing may unwind out of here.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: libtorch passes a NUL-terminated message that lives for this call.
        let message = unsafe { string_at(message) };
        if let Some(handler) = ON_WARNING.get() {
            handler(message, deprecation != 0);
        }
    });
}

/// Sends libtorch's warnings raised on the calling thread to `handler` instead of stderr
/// (libtorch's warning handler is per thread: call this on every thread that runs libtorch).
pub fn forward_warnings(handler: fn(String, bool)) {
    let _ = ON_WARNING.set(handler);
    // SAFETY: installs a static handler on this thread; nothing is freed.
    unsafe { tn_forward_warnings(warning_trampoline) }
}

/// Turns oneDNN Graph fusion on or off for the graphs optimized from now on (process-wide).
pub fn onednn_fusion(enabled: bool) -> Result<()> {
    // SAFETY: a global switch; no handles.
    shim!(tn_onednn_fusion(enabled as c_int))
}

/// One entry of libtorch's CPU capability map.
#[derive(Debug, Clone, PartialEq)]
pub enum Capability {
    Flag(bool),
    Count(i64),
    Text(String),
}

/// libtorch's CPU capability map (ISA flags such as `avx512_bf16`, cache sizes, the CPU name).
pub fn cpu_capabilities() -> Result<Vec<(String, Capability)>> {
    let mut out: Vec<(String, Capability)> = Vec::new();
    let mut cb = Callback::new(|name, kind: c_int, number: i64, text| {
        let value = match kind {
            0 => Capability::Flag(number != 0),
            1 => Capability::Count(number),
            // SAFETY: the shim passes strings that live for the callback.
            _ => Capability::Text(unsafe { string_at(text) }),
        };
        // SAFETY: as above.
        out.push((unsafe { string_at(name) }, value));
    });
    // SAFETY: no handles in; `cb` lives across the call.
    shim!(tn_cpu_capabilities(cb.capabilities(), cb.ctx()))?;
    cb.finish();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Whether the CPU computes in bfloat16 natively (AVX512-BF16 or AMX-BF16): where it does not,
/// libtorch emulates bf16 and a bf16 model runs slower than float32.
pub fn cpu_has_native_bf16() -> bool {
    cpu_capabilities().is_ok_and(|caps| {
        caps.iter()
            .any(|(k, v)| (k == "avx512_bf16" || k == "amx_bf16") && *v == Capability::Flag(true))
    })
}

/// Loads a shared library into the process for good (`RTLD_NOW | RTLD_GLOBAL`): the dynamic
/// loader's message (unresolved symbols named) or a C++ exception from its static initializers
/// becomes the error.
pub fn dlopen(path: &std::path::Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| anyhow!("the path contains a NUL byte"))?;
    // SAFETY: a C string that lives across the call.
    shim!(tn_dlopen(c.as_ptr())).map(|_| ())
}

/// Sets libtorch's inter-op thread count (accepted once, before any inter-op work started).
pub fn set_num_interop_threads(n: i32) -> Result<()> {
    // SAFETY: a plain setter; libtorch reports a refusal through its last-error slot.
    unsafe { torch_sys::at_set_num_interop_threads(n) };
    check_last_error()
}

/// The libtorch this crate is built against, `"2.11.0"` (crates/core/build.rs reads its headers).
/// The addon runs against the same release: libtorch's C++ ABI changes between releases.
pub const LIBTORCH_VERSION: &str = env!("TORCH_NODE_LIBTORCH_VERSION");

/// The ops tch wraps that this libtorch lacks (empty against 2.13): against 2.11, the stand-ins of
/// `src/shim/torch_compat.h`, which fail with an error naming the op and `LIBTORCH_VERSION`.
pub fn missing_ops() -> Vec<&'static str> {
    let listed: &'static str = env!("TORCH_NODE_MISSING_OPS");
    listed.split(',').filter(|op| !op.is_empty()).collect()
}

/// libtorch's (major, minor) version, as compiled into the shim.
pub fn torch_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints we own.
    unsafe { tn_torch_version(&mut major, &mut minor) };
    (major, minor)
}

/// The size of a memory page.
#[cfg(target_os = "linux")]
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// Advises `MADV_DONTNEED` on `len` bytes of private anonymous memory at `start` (whole pages):
/// they leave the process, and a later read of them sees zeros. The memory stays mapped, so no
/// pointer dangles; the caller owns the proof that nothing needs the bytes again. False where
/// the kernel refused.
#[cfg(target_os = "linux")]
pub fn discard_pages(start: usize, len: usize) -> bool {
    // SAFETY: madvise changes no mapping, only the contents of pages the caller gives up.
    unsafe { libc::madvise(start as *mut c_void, len, libc::MADV_DONTNEED) == 0 }
}

/// Drops this process's resident pages of `[start, start + len)`, a whole read-only private file
/// mapping with no copied-on-write page (`crate::aot_pages` checks that in smaps): the pages stay
/// in the page cache and are read back from the file on the next access. False where the kernel
/// refused (nothing changed then).
#[cfg(target_os = "linux")]
pub fn release_clean_file_pages(start: usize, len: usize) -> bool {
    // SAFETY: MADV_DONTNEED on a clean private file mapping discards no data (its pages equal the
    // file's); the mapping stays, so no pointer into it dangles. The caller passes a whole mapping
    // it just read from /proc/self/smaps.
    unsafe { libc::madvise(start as *mut c_void, len, libc::MADV_DONTNEED) == 0 }
}

/// Registers `f` to run inside C's `exit()`, before the destructors and handlers registered
/// earlier (libtorch's: its library loaded before this one). False where it could not be.
pub fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: `f` is a plain function of this library, which is never unloaded before exit (Node
    // does not unload addons; glibc ties the registration to this object all the same).
    unsafe { libc::atexit(f) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_read_by_the_build_is_the_headers() {
        let (major, minor) = torch_version();
        assert!(
            LIBTORCH_VERSION.starts_with(&format!("{major}.{minor}.")),
            "{LIBTORCH_VERSION} vs {major}.{minor}"
        );
    }

    /// Against 2.11 the ops tch 0.26 wraps that libtorch lacks are stand-ins that fail with an
    /// error naming the op and the version (never an abort); against 2.12 and 2.13 none is missing.
    #[test]
    fn an_op_the_libtorch_lacks_is_an_error_naming_it() {
        let (_, minor) = torch_version();
        let missing = missing_ops();
        assert_eq!(
            missing.is_empty(),
            minor >= 12,
            "{missing:?} on {LIBTORCH_VERSION}"
        );
        let x = tch::Tensor::f_ones([1, 1, 4, 4], (tch::Kind::Float, tch::Device::Cpu)).unwrap();
        let lanczos = x.f_internal_upsample_lanczos2d_aa([2, 2], false, None, None);
        let key = tch::Tensor::f_zeros([2], (tch::Kind::Int64, tch::Device::Cpu)).unwrap();
        let split = tch::Tensor::f_internal_philox_key_split(&key, 2);
        if missing.is_empty() {
            // The real op runs (the stand-in's message would say "torch-node: the op").
            assert_eq!(lanczos.unwrap().size(), [1, 1, 2, 2]);
            if let Err(e) = split {
                assert!(!e.to_string().contains("torch-node: the op"), "{e}");
            }
        } else {
            assert!(missing.contains(&"_upsample_lanczos2d_aa") && missing.contains(&"_philox_key_split"));
            for (op, result) in [("_upsample_lanczos2d_aa", lanczos), ("_philox_key_split", split)] {
                let message = result.expect_err(op).to_string();
                let expected = format!("torch-node: the op {op} is not in libtorch {LIBTORCH_VERSION}");
                assert!(message.contains(&expected), "{message}");
            }
        }
    }
}
