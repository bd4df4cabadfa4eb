//! The folder AOTInductor's package loader extracts a `.pt2` into (`<tmp>/aotinductor_XXXXXX/`),
//! removed as soon as a CPU load has mapped its program.
//!
//! The loader removes that folder in its destructor, which runs when a module is disposed or
//! collected, and never when the process ends another way: `process.exit()`, an uncaught
//! exception, a signal. Each such exit left the whole package in the temporary folder (SmolLM2
//! with `--autotune`: 1.1 GB per run). On CPU the loader has read all it needs when the load
//! returns: the weights and kernels are in the program's `.so`, which stays mapped (Linux keeps
//! an unlinked file's pages while it is mapped), and the metadata is parsed. So the folder goes
//! right after the load; the destructor's own removal then finds nothing and says nothing. Not
//! on CUDA: a CUDA program may read kernel binaries (`.cubin`) from the folder at its first run.
use std::path::{Path, PathBuf};

/// The files an extraction holds that the load has read in full: the program (`.so`), its
/// generated source (`.cpp`) and metadata (`.json`). A folder with anything else is kept.
const READ_AT_LOAD: [&str; 3] = ["so", "cpp", "json"];

/// Removes the extraction folder of the package a CPU load just mapped, found from the files
/// the load mapped (`aot_pages::release_new_file_pages`); returns the folder removed, if any.
pub fn remove(mapped: &[PathBuf]) -> Option<PathBuf> {
    let root = mapped
        .iter()
        .find_map(|file| extraction_root(file))?
        .to_path_buf();
    if !holds_only(&root, &READ_AT_LOAD) {
        return None;
    }
    std::fs::remove_dir_all(&root).ok().map(|_| root)
}

/// The folder the loader extracted `so` into: the nearest ancestor named `aotinductor_*` under
/// which the file sits at `<model>/data/aotinductor/...` (the package's own layout).
fn extraction_root(so: &Path) -> Option<&Path> {
    if so.extension()? != "so" {
        return None;
    }
    so.ancestors().skip(1).find(|dir| {
        let named = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("aotinductor_"));
        let inner: Vec<_> = so
            .strip_prefix(dir)
            .map(|r| r.components().collect())
            .unwrap_or_default();
        named && inner.len() > 3 && inner[1].as_os_str() == "data" && inner[2].as_os_str() == "aotinductor"
    })
}

/// Whether every file under `dir` (recursively) has one of `extensions`; false when it cannot
/// be read, or holds a link or anything but files and folders.
fn holds_only(dir: &Path, extensions: &[&str]) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.into_iter().all(|entry| {
        let Ok(entry) = entry else { return false };
        match entry.file_type() {
            Ok(t) if t.is_dir() => holds_only(&entry.path(), extensions),
            Ok(t) if t.is_file() => entry
                .path()
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| extensions.contains(&e)),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_loaders_folder_above_the_package_layout() {
        let so = Path::new("/tmp/aotinductor_Ab12/model/data/aotinductor/model/x.wrapper.so");
        assert_eq!(extraction_root(so), Some(Path::new("/tmp/aotinductor_Ab12")));
        // A folder of that name further up, and a user's TMPDIR named like one, are not taken.
        let nested = Path::new("/srv/aotinductor_me/aotinductor_Z/m/data/aotinductor/m/x.so");
        assert_eq!(
            extraction_root(nested),
            Some(Path::new("/srv/aotinductor_me/aotinductor_Z"))
        );
        for other in [
            "/tmp/aotinductor_Ab12/model/data/x.so",
            "/tmp/aotinductor_Ab12/model/data/aotinductor/model/x.cpp",
            "/usr/lib/libtorch_cpu.so",
            "/tmp/aotinductor_Ab12/x.so",
        ] {
            assert_eq!(extraction_root(Path::new(other)), None, "{other}");
        }
    }

    #[test]
    fn only_a_folder_of_program_files_is_removed() {
        let base = std::env::temp_dir().join(format!("torch-node-aot-extraction-{}", std::process::id()));
        let program = base.join("aotinductor_t1/model/data/aotinductor/model");
        std::fs::create_dir_all(&program).unwrap();
        for f in ["k.so", "k.cpp", "k.json"] {
            std::fs::write(program.join(f), b"x").unwrap();
        }
        let kept = base.join("aotinductor_t2/model/data/aotinductor/model");
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::write(kept.join("k.so"), b"x").unwrap();
        std::fs::write(kept.join("kernel.cubin"), b"x").unwrap();

        assert_eq!(remove(&[program.join("k.so")]), Some(base.join("aotinductor_t1")));
        assert!(!base.join("aotinductor_t1").exists());
        assert_eq!(remove(&[kept.join("k.so")]), None);
        assert!(kept.join("kernel.cubin").exists());
        assert_eq!(remove(&[PathBuf::from("/usr/lib/libc.so")]), None);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
