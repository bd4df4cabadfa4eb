//! Links the addon against libtorch so that it loads with no `LD_LIBRARY_PATH`. The C++ shim is
//! the core's (crates/core/build.rs).
fn main() {
    napi_build::setup();
    // torch-sys declares `links = "tch"` and prints `cargo:libtorch_lib=...`, which cargo hands to
    // direct dependents as DEP_TCH_LIBTORCH_LIB (this is why torch-sys is a direct dependency).
    // Only its presence matters here: the link lines below are relative to the addon.
    std::env::var("DEP_TCH_LIBTORCH_LIB")
        .expect("DEP_TCH_LIBTORCH_LIB is unset: torch-sys did not find libtorch");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    // scripts/build.js links `<package>/libtorch` to the libtorch folder: no absolute path of the
    // build machine in the addon, and no LD_LIBRARY_PATH needed (cargo's test binaries get one
    // from tools/test.js).
    println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN/libtorch/lib");
    // libtorch.so must be NEEDED although nothing in the addon calls into it: the code of an
    // AOTInductor package and torchvision's op library need it loaded (they have no RUNPATH to
    // find it), and in a CUDA libtorch it is what loads libtorch_cuda.so (its own DT_NEEDED):
    // without that CUDA is silently unavailable (tch-rs issues #177, #904, #980). Not linking
    // libtorch_cuda.so directly keeps one addon binary for both cache variants (scripts/cache.js):
    // the CPU variant's libtorch.so names libtorch_cpu.so only.
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
    println!("cargo:rustc-link-arg=-Wl,--as-needed");
}
