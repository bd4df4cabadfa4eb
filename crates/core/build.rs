//! Compiles the small C++ shim (`src/shim/shim.cpp`) for what `tch` does not expose, and the empty
//! `libtorch_python.so` stand-in that `library.rs` embeds. The addon's link lines (RUNPATH,
//! libtorch.so NEEDED) are in the addon's build.rs; the same `-ltorch` is given to this crate's
//! test binaries, which load AOTInductor packages as the addon does.
use std::path::PathBuf;

fn main() {
    // torch-sys declares `links = "tch"` and prints `cargo:libtorch_lib=...`, which cargo hands to
    // direct dependents as DEP_TCH_LIBTORCH_LIB (this is why torch-sys is a direct dependency).
    let lib_dir = PathBuf::from(
        std::env::var("DEP_TCH_LIBTORCH_LIB")
            .expect("DEP_TCH_LIBTORCH_LIB is unset: torch-sys did not find libtorch"),
    );
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    // Test binaries only (a library's link args reach its tests, not its dependents).
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
    println!("cargo:rustc-link-arg=-Wl,--as-needed");
    build_shim(&lib_dir);
    build_python_stub();
}

/// `libtorch_python.so`, empty (src/shim/torch_python_stub.c says why), embedded in the addon.
fn build_python_stub() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("libtorch_python_stub.so");
    println!("cargo:rerun-if-changed=src/shim/torch_python_stub.c");
    let compiler = cc::Build::new().get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-Wl,-soname,libtorch_python.so", "-o"])
        .arg(&out)
        .arg("src/shim/torch_python_stub.c")
        .status()
        .expect("cannot run the C compiler for the libtorch_python stub");
    assert!(status.success(), "building the libtorch_python stub failed");
}

/// libtorch's headers sit beside its lib dir in both layouts we support: the libtorch zip
/// (`libtorch/{lib,include}`) and the PyPI wheel (`site-packages/torch/{lib,include}`).
fn build_shim(lib_dir: &std::path::Path) {
    let root = lib_dir.parent().expect("libtorch lib dir has a parent");
    let include = root.join("include");
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_string());
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    println!("cargo:rerun-if-changed=src/shim/shim.cpp");
    cc::Build::new()
        .cpp(true)
        .file("src/shim/shim.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        .flag("-Wno-unused-parameter")
        .flag("-Wno-deprecated-declarations")
        .warnings(false)
        .compile("torch_node_shim");
}
