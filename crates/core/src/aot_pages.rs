//! Gives back the pages of a `.pt2` program's weights that its loader leaves resident twice
//! (Linux only; elsewhere a no-op): the package's file pages after it loads, and the constants
//! a program never reads.
//!
//! AOTInductor embeds the weights in the compiled `.so` and, on CPU, copies them at load into a
//! blob it allocates (`load_constants` in aoti_runtime/model_base.h: `RAII_cpuMalloc` then
//! `memcpy` from `_get_constants_start()`); the `.so`'s pages it read stay mapped and count in
//! the process's RSS: measured, SmolLM2-135M (513 MiB of fp32 weights) loaded at 1,292 MiB RSS,
//! half of it the mapped `.so` (`RssFile`). The runtime never reads them again (a reload reads
//! the file anew), so after a load the read-only file mappings it created are advised
//! `MADV_DONTNEED`: their pages leave this process (the page cache keeps them) and would be read
//! back from the file if touched. Only clean mappings are advised: read-only, private, backed by
//! a file, none of their pages copied-on-write (`Anonymous: 0 kB` in smaps: a RELRO segment holds
//! relocated pointers that the advice would revert to the file's bytes).
use crate::ffi::{self, AotiHandle};
use anyhow::Result;
use std::collections::HashSet;

/// The smallest mapping worth advising (the weights' section; code and small data stay).
const MIN_BYTES: usize = 16 << 20;

/// One mapping of /proc/self/smaps.
#[derive(Debug, PartialEq)]
struct Mapping {
    range: (usize, usize),
    perms: String,
    inode: u64,
    /// The mapped file's path ("" for an anonymous mapping).
    path: String,
    anonymous_kb: u64,
    rss_kb: u64,
}

/// The ranges mapped now (call before a load; `release_new_file_pages` takes it after).
pub fn mapped() -> HashSet<(usize, usize)> {
    read_smaps().into_iter().map(|m| m.range).collect()
}

/// Advises away the clean, read-only file pages of the mappings that are not in `before` (what
/// a load mapped); returns the bytes that were resident in them, and the files those mappings
/// map, each once (`crate::aot_extraction` finds the package's extraction folder among them).
pub fn release_new_file_pages(before: &HashSet<(usize, usize)>) -> (usize, Vec<std::path::PathBuf>) {
    let (mut released, mut files) = (0, Vec::new());
    for m in read_smaps() {
        if before.contains(&m.range) {
            continue;
        }
        if releasable(&m) {
            let (start, end) = m.range;
            if release(start, end - start) {
                released += m.rss_kb as usize * 1024;
            }
        }
        if m.inode != 0 && m.path.starts_with('/') {
            files.push(std::path::PathBuf::from(m.path));
        }
    }
    files.sort();
    files.dedup();
    (released, files)
}

/// Gives back the memory of the loaded program's constants named in `unread` (original FQNs)
/// that it never reads; returns the bytes given back.
///
/// With `--autotune`, Inductor's C++ GEMM template packs each weight into a new constant, and
/// torch 2.13 keeps the original beside it in the package (declared, never read): the loaded
/// weights took twice their size (SmolLM2: 405 of its 810 MiB). A causal LM folder's manifest
/// lists them (`unused_constants`); the export proved each one unread by filling it with NaN
/// before its compiled check against transformers. Only whole pages that no other constant's
/// storage touches are given back.
pub fn release_unread_constants(handle: &AotiHandle, unread: &[String]) -> Result<usize> {
    if unread.is_empty() || !cfg!(target_os = "linux") {
        return Ok(0);
    }
    let constants = ffi::aoti_constants(handle)?;
    let unread: HashSet<&str> = unread.iter().map(String::as_str).collect();
    let mut released = 0;
    for (start, len) in unread_pages(&constants, &unread, page_size()) {
        if discard(start, len) {
            released += len;
        }
    }
    Ok(released)
}

/// The runs of whole pages inside the `unread` constants' storage that no other constant's
/// storage touches: (start, len), ascending. `constants` are (name, address, bytes), address 0
/// for one with no plain storage (it shares none of the others' memory).
fn unread_pages(
    constants: &[(String, usize, usize)],
    unread: &HashSet<&str>,
    page: usize,
) -> Vec<(usize, usize)> {
    let down = |a: usize| a / page * page;
    let up = |a: usize| a.div_ceil(page) * page;
    let mut kept: Vec<(usize, usize)> = constants
        .iter()
        .filter(|(name, address, bytes)| !unread.contains(name.as_str()) && *address != 0 && *bytes != 0)
        .map(|(_, address, bytes)| (down(*address), up(address + bytes)))
        .collect();
    kept.sort_unstable();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (name, address, bytes) in constants {
        if !unread.contains(name.as_str()) || *address == 0 {
            continue;
        }
        let (mut start, end) = (up(*address), down(address + bytes));
        for &(a, b) in &kept {
            if b <= start || a >= end {
                continue;
            }
            if a > start {
                runs.push((start, a - start));
            }
            start = start.max(b);
        }
        if start < end {
            runs.push((start, end - start));
        }
    }
    runs.sort_unstable();
    runs.dedup();
    runs
}

#[cfg(target_os = "linux")]
use crate::ffi::runtime::page_size;

#[cfg(not(target_os = "linux"))]
fn page_size() -> usize {
    4096
}

#[cfg(target_os = "linux")]
fn discard(start: usize, len: usize) -> bool {
    // The range is whole pages of constants the program never reads (proven at export, see
    // release_unread_constants) that no other constant's storage touches.
    crate::ffi::runtime::discard_pages(start, len)
}

#[cfg(not(target_os = "linux"))]
fn discard(_start: usize, _len: usize) -> bool {
    false
}

fn releasable(m: &Mapping) -> bool {
    m.perms == "r--p" && m.inode != 0 && m.anonymous_kb == 0 && m.range.1 - m.range.0 >= MIN_BYTES
}

#[cfg(target_os = "linux")]
use crate::ffi::runtime::release_clean_file_pages as release;

#[cfg(not(target_os = "linux"))]
fn release(_start: usize, _len: usize) -> bool {
    false
}

#[cfg(target_os = "linux")]
fn read_smaps() -> Vec<Mapping> {
    std::fs::read_to_string("/proc/self/smaps")
        .map(|s| parse_smaps(&s))
        .unwrap_or_default()
}

#[cfg(not(target_os = "linux"))]
fn read_smaps() -> Vec<Mapping> {
    Vec::new()
}

fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(start), Ok(end)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                let perms = fields.next().unwrap_or("").to_string();
                let inode = fields.nth(2).and_then(|i| i.parse().ok()).unwrap_or(0);
                // The path is the rest of the line (it may hold spaces).
                let path = fields.collect::<Vec<_>>().join(" ");
                out.push(Mapping {
                    range: (start, end),
                    perms,
                    inode,
                    path,
                    // Unknown until its fields say otherwise: never advised.
                    anonymous_kb: u64::MAX,
                    rss_kb: 0,
                });
                continue;
            }
        }
        let kb = fields.next().and_then(|v| v.parse::<u64>().ok());
        if let (Some(m), Some(kb)) = (out.last_mut(), kb) {
            match first {
                "Anonymous:" => m.anonymous_kb = kb,
                "Rss:" => m.rss_kb = kb,
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
7ff9fbadd000-7ffa1bc00000 rw-p 00000000 00:00 0 
Rss:              525452 kB
Anonymous:        525452 kB
7ffa1bd05000-7ffa3be28000 r--p 00104000 fe:00 10346889                   /tmp/aotinductor_x/model.wrapper.so
Size:             525452 kB
Rss:              525452 kB
Anonymous:             0 kB
7ffa3be28000-7ffa3c000000 r--p 00000000 fe:00 10346889                   /tmp/aotinductor_x/model.wrapper.so
Rss:                  12 kB
Anonymous:             0 kB
7ffa40000000-7ffa42000000 r--p 00200000 fe:00 77                         /usr/lib/relro.so
Rss:               32768 kB
Anonymous:             4 kB
";

    #[test]
    fn only_large_clean_read_only_file_mappings_are_released() {
        let maps = parse_smaps(SMAPS);
        assert_eq!(maps.len(), 4);
        assert_eq!(maps[1].inode, 10346889);
        assert_eq!(maps[1].path, "/tmp/aotinductor_x/model.wrapper.so");
        assert_eq!(maps[0].path, "");
        assert_eq!((maps[1].rss_kb, maps[1].anonymous_kb), (525452, 0));
        let chosen: Vec<bool> = maps.iter().map(releasable).collect();
        // anonymous heap, the weights, a small section, a mapping with copied-on-write pages
        assert_eq!(chosen, [false, true, false, false]);
    }

    fn pages(constants: &[(&str, usize, usize)], unread: &[&str]) -> Vec<(usize, usize)> {
        let constants: Vec<(String, usize, usize)> =
            constants.iter().map(|&(n, a, b)| (n.to_string(), a, b)).collect();
        unread_pages(&constants, &unread.iter().copied().collect(), 0x1000)
    }

    #[test]
    fn only_whole_pages_of_unread_constants_are_given_back() {
        // a: 0x1800..0x5800 holds whole pages 0x2000..0x5000; b: used, 0x5800..0x6000
        let c = [("a", 0x1800, 0x4000), ("b", 0x5800, 0x800)];
        assert_eq!(pages(&c, &["a"]), [(0x2000, 0x3000)]);
        assert_eq!(pages(&c, &[]), []);
        // A constant smaller than a page, or one not held, gives back nothing.
        assert_eq!(pages(&[("a", 0x1800, 0x400)], &["a", "zzz"]), []);
    }

    #[test]
    fn pages_another_constant_touches_are_kept() {
        // b (read) shares a's storage from 0x3100 to 0x3200: the page 0x3000..0x4000 stays.
        let c = [("a", 0x1000, 0x5000), ("b", 0x3100, 0x100), ("n", 0, 0)];
        assert_eq!(pages(&c, &["a", "n"]), [(0x1000, 0x2000), (0x4000, 0x2000)]);
        // Two unread constants side by side: both given back.
        let c = [("a", 0x1000, 0x1000), ("b", 0x2000, 0x1000)];
        assert_eq!(pages(&c, &["a", "b"]), [(0x1000, 0x1000), (0x2000, 0x1000)]);
    }

    #[test]
    fn a_mapping_without_its_fields_is_never_released() {
        let maps = parse_smaps("7ffa1bd05000-7ffa3be28000 r--p 00104000 fe:00 10346889 /x.so\n");
        assert!(!releasable(&maps[0]));
    }
}
