//! Gives back the pages of a `.pt2` program's weights that its loader leaves resident twice
//! (Linux only; elsewhere a no-op).
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
use std::collections::HashSet;

/// The smallest mapping worth advising (the weights' section; code and small data stay).
const MIN_BYTES: usize = 16 << 20;

/// One mapping of /proc/self/smaps.
#[derive(Debug, PartialEq)]
struct Mapping {
    range: (usize, usize),
    perms: String,
    inode: u64,
    anonymous_kb: u64,
    rss_kb: u64,
}

/// The ranges mapped now (call before a load; `release_new_file_pages` takes it after).
pub fn mapped() -> HashSet<(usize, usize)> {
    read_smaps().into_iter().map(|m| m.range).collect()
}

/// Advises away the clean, read-only file pages of the mappings that are not in `before`;
/// returns the bytes that were resident in them.
pub fn release_new_file_pages(before: &HashSet<(usize, usize)>) -> usize {
    let mut released = 0;
    for m in read_smaps() {
        if !before.contains(&m.range) && releasable(&m) {
            let (start, end) = m.range;
            if release(start, end - start) {
                released += m.rss_kb as usize * 1024;
            }
        }
    }
    released
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
                out.push(Mapping {
                    range: (start, end),
                    perms,
                    inode,
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
        assert_eq!((maps[1].rss_kb, maps[1].anonymous_kb), (525452, 0));
        let chosen: Vec<bool> = maps.iter().map(releasable).collect();
        // anonymous heap, the weights, a small section, a mapping with copied-on-write pages
        assert_eq!(chosen, [false, true, false, false]);
    }

    #[test]
    fn a_mapping_without_its_fields_is_never_released() {
        let maps = parse_smaps("7ffa1bd05000-7ffa3be28000 r--p 00104000 fe:00 10346889 /x.so\n");
        assert!(!releasable(&maps[0]));
    }
}
