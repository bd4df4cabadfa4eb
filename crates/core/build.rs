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
    libtorch_version(&lib_dir);
    build_shim(&lib_dir);
    build_python_stub();
}

/// Tells the crate which libtorch it is built against (TORCH_NODE_LIBTORCH_VERSION, "2.11.0", read
/// from libtorch's headers) and which ops tch wraps that this libtorch lacks
/// (TORCH_NODE_MISSING_OPS, comma-separated): those `src/shim/torch_compat.h` stands in for, each
/// declared there with the release that brought it. scripts/build.js injects that header into the
/// C++ compiles (CXXFLAGS) for the same versions.
fn libtorch_version(lib_dir: &std::path::Path) {
    let include = lib_dir
        .parent()
        .expect("libtorch lib dir has a parent")
        .join("include");
    let header = [
        "torch/headeronly/version.h",
        "torch/csrc/api/include/torch/version.h",
    ]
    .iter()
    .map(|h| include.join(h))
    .find(|h| h.exists())
    .unwrap_or_else(|| panic!("no torch/version.h under {}", include.display()));
    println!("cargo:rerun-if-changed={}", header.display());
    let text = std::fs::read_to_string(&header).expect("reading libtorch's version.h");
    let part = |name: &str| -> u32 {
        let prefix = format!("#define TORCH_VERSION_{name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{}: no TORCH_VERSION_{name}", header.display()))
    };
    let (major, minor, patch) = (part("MAJOR"), part("MINOR"), part("PATCH"));
    println!("cargo:rustc-env=TORCH_NODE_LIBTORCH_VERSION={major}.{minor}.{patch}");
    println!("cargo:rerun-if-changed=src/shim/torch_compat.h");
    let compat = std::fs::read_to_string("src/shim/torch_compat.h").expect("reading torch_compat.h");
    let missing: Vec<&str> = compat
        .lines()
        .filter_map(|l| l.strip_prefix("TORCH_NODE_STAND_IN("))
        .filter_map(|args| {
            // TORCH_NODE_STAND_IN(return type, name, "2.12")
            let mut parts = args.trim_end_matches(')').rsplitn(3, ',').map(str::trim);
            let since = parts.next()?.trim_matches('"');
            let name = parts.next()?;
            let (since_major, since_minor) = since.split_once('.')?;
            let since = (since_major.parse::<u32>().ok()?, since_minor.parse::<u32>().ok()?);
            ((major, minor) < since).then_some(name)
        })
        .collect();
    println!("cargo:rustc-env=TORCH_NODE_MISSING_OPS={}", missing.join(","));
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
    println!("cargo:rerun-if-changed=src/shim/rows_linear.cpp");
    println!("cargo:rerun-if-changed=src/shim/rows_linear_int4.cpp");
    println!("cargo:rerun-if-changed=src/shim/rows_linear.h");
    println!("cargo:rerun-if-changed=src/shim/protect.h");
    cc::Build::new()
        .cpp(true)
        .file("src/shim/shim.cpp")
        .file("src/shim/rows_linear.cpp")
        .file("src/shim/rows_linear_int4.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        .flag("-Wno-unused-parameter")
        .flag("-Wno-deprecated-declarations")
        // rows_linear.cpp's at::parallel_for is ATen's OpenMP loop, inlined from its headers.
        .flag("-fopenmp")
        .warnings(false)
        .compile("torch_node_shim");
    // Its runtime: NEEDED libgomp.so.1, the soname libtorch_cpu.so needs too, so the process
    // holds one OpenMP runtime (the wheel's, found first through the RUNPATH).
    println!("cargo:rustc-link-lib=dylib=gomp");
}
