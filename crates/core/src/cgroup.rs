//! The CPUs this process may really use: the cores its affinity mask allows, capped by its
//! cgroup's CPU quota (Docker's `--cpus`, Kubernetes' `limits.cpu`).
//!
//! libtorch sizes its OpenMP teams from the affinity mask only, so in a container limited to 2
//! CPUs on a 64-core node it starts 64 threads that the CFS quota throttles in turn: every
//! parallel region then waits for threads that are descheduled until the next period (the
//! 10–30× slowdowns of docs/text.md#speed). The executor's default team size uses
//! `usable()` instead (executor.rs).
//!
//! The quota is the smallest one along the process's cgroup path up to its hierarchy's mount,
//! in cgroup v2 (`cpu.max`: `"max 100000"` or `"200000 100000"`) and in v1's `cpu` controller
//! (`cpu.cfs_quota_us` ÷ `cpu.cfs_period_us`, `-1`: none), both where a hybrid system mounts
//! both. The cgroup is found from `/proc/self/cgroup` and `/proc/self/mountinfo`, not assumed at
//! /sys/fs/cgroup. A file missing, unreadable or not understood sets no limit. `read(root)` is a
//! pure function of the files under `root` ("/" for this machine), so tests build fake trees.
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The smallest CPU quota found and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Quota {
    /// CPUs' worth of time per period: quota ÷ period (`1.5` for `--cpus 1.5`).
    pub cpus: f64,
    /// The file that set it, as this machine names it (`/sys/fs/cgroup/cpu.max`).
    pub file: String,
}

/// What `read` found: the affinity mask's cores, the quota, and the cores to use.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuLimit {
    /// The cores the affinity mask allows (`sched_getaffinity`, what libtorch counts).
    pub affinity: usize,
    /// The cgroup CPU quota; None: no limit (or none readable).
    pub quota: Option<Quota>,
    /// min(affinity, ⌈quota⌉), at least 1.
    pub usable: usize,
}

/// The quota of the process whose `/proc/self` is under `root` (`root` prefixes every path read).
pub fn quota(root: &Path) -> Option<Quota> {
    let under = |p: &str| root.join(p.trim_start_matches('/'));
    let cgroups = std::fs::read_to_string(under("proc/self/cgroup")).ok()?;
    let mounts = std::fs::read_to_string(under("proc/self/mountinfo")).ok()?;
    let mut best: Option<Quota> = None;
    for mount in mounts.lines().filter_map(Mount::parse) {
        let Some(path) = own_path(&cgroups, mount.v2, &mount.options) else {
            continue;
        };
        let dir = match Path::new(&path).strip_prefix(&mount.root) {
            Ok(rest) => Path::new(&mount.point).join(rest),
            // The process's cgroup is outside what this mount shows: its top is the nearest.
            Err(_) => PathBuf::from(&mount.point),
        };
        // From the process's own cgroup up to the mount point, each level's limit.
        for level in dir.ancestors().take_while(|d| d.starts_with(&mount.point)) {
            let found = if mount.v2 {
                cpu_max(&under, level)
            } else {
                cfs(&under, level)
            };
            if let Some(q) = found {
                if best.as_ref().is_none_or(|b| q.cpus < b.cpus) {
                    best = Some(q);
                }
            }
        }
    }
    best
}

/// A cgroup mount of /proc/self/mountinfo: `36 25 0:30 /root /mount/point rw - cgroup2 cgroup2 rw`.
struct Mount {
    root: String,
    point: String,
    v2: bool,
    /// The super options: v1's controllers (`rw,cpu,cpuacct`).
    options: String,
}

impl Mount {
    fn parse(line: &str) -> Option<Mount> {
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let (fstype, _source, options) = (right.next()?, right.next()?, right.next().unwrap_or(""));
        let v2 = match fstype {
            "cgroup2" => true,
            "cgroup" if options.split(',').any(|o| o == "cpu") => false,
            _ => return None,
        };
        Some(Mount {
            root: unescape(left.get(3)?),
            point: unescape(left.get(4)?),
            v2,
            options: options.to_string(),
        })
    }
}

/// mountinfo writes a space, tab, newline and backslash in a path as `\040`, `\011`, `\012`, `\134`.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4).and_then(|d| u8::from_str_radix(d, 8).ok());
        match code {
            Some(c) => {
                out.push(c as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The process's path in the hierarchy: v2's `0::/path` line, or the v1 line whose controllers
/// include one of the mount's (`4:cpu,cpuacct:/docker/abc`).
fn own_path(cgroups: &str, v2: bool, mount_options: &str) -> Option<String> {
    cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let ours = if v2 {
            id == "0" && controllers.is_empty()
        } else {
            controllers
                .split(',')
                .any(|c| c == "cpu" && mount_options.split(',').any(|o| o == c))
        };
        ours.then(|| path.to_string())
    })
}

/// v2: `cpu.max`, `"$QUOTA $PERIOD"` or `"max $PERIOD"`.
fn cpu_max(under: &dyn Fn(&str) -> PathBuf, dir: &Path) -> Option<Quota> {
    let file = dir.join("cpu.max");
    let text = std::fs::read_to_string(under(file.to_str()?)).ok()?;
    let mut fields = text.split_whitespace();
    let quota = fields.next()?.parse::<u64>().ok()?;
    let period = fields.next().map_or(Some(100_000), |p| p.parse::<u64>().ok())?;
    ratio(quota, period, file)
}

/// v1: `cpu.cfs_quota_us` (`-1`: none) ÷ `cpu.cfs_period_us`.
fn cfs(under: &dyn Fn(&str) -> PathBuf, dir: &Path) -> Option<Quota> {
    let read = |name: &str| -> Option<u64> {
        let text = std::fs::read_to_string(under(dir.join(name).to_str()?)).ok()?;
        text.trim().parse::<u64>().ok()
    };
    ratio(
        read("cpu.cfs_quota_us")?,
        read("cpu.cfs_period_us")?,
        dir.join("cpu.cfs_quota_us"),
    )
}

fn ratio(quota: u64, period: u64, file: PathBuf) -> Option<Quota> {
    (quota > 0 && period > 0).then(|| Quota {
        cpus: quota as f64 / period as f64,
        file: file.to_string_lossy().into_owned(),
    })
}

/// `affinity` capped by `quota`: min(affinity, ⌈cpus⌉), at least 1.
pub fn limit(affinity: usize, quota: Option<Quota>) -> CpuLimit {
    let affinity = affinity.max(1);
    let capped = quota.as_ref().map_or(affinity, |q| {
        // Saturating cast: a huge quota is no limit.
        (q.cpus.ceil() as usize).clamp(1, affinity)
    });
    CpuLimit {
        affinity,
        quota,
        usable: capped,
    }
}

/// The cores this process's affinity mask allows (`Cpus_allowed_list` of /proc/self/status, what
/// `sched_getaffinity` reports; None where it cannot be read).
fn affinity() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    cpu_list_count(list.trim())
}

/// How many CPUs a kernel CPU list names (`0-3,8,10-11` is 7); None where it is malformed.
fn cpu_list_count(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi) = (lo.parse::<usize>().ok()?, hi.parse::<usize>().ok()?);
        n += hi.checked_sub(lo)? + 1;
    }
    (n > 0).then_some(n)
}

/// This process's limit, read once (`/` as the root).
pub fn usable() -> &'static CpuLimit {
    static LIMIT: OnceLock<CpuLimit> = OnceLock::new();
    LIMIT.get_or_init(|| {
        let cores = affinity()
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1);
        limit(cores, quota(Path::new("/")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake root: `files` are (path, text) pairs under it.
    fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let root = std::env::temp_dir().join(format!("torch-node-cgroup-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (path, text) in files {
            let file = root.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        root
    }

    const V2_MOUNT: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";

    fn cpus(root: &Path) -> Option<f64> {
        quota(root).map(|q| q.cpus)
    }

    #[test]
    fn v2_reads_cpu_max_of_the_own_cgroup_and_the_smallest_up_the_path() {
        let pod = "/kubepods.slice/pod1/cri-abc";
        let root = tree(
            "v2",
            &[
                ("proc/self/cgroup", &format!("0::{pod}\n")),
                ("proc/self/mountinfo", V2_MOUNT),
                ("sys/fs/cgroup/cpu.max", "max 100000\n"),
                ("sys/fs/cgroup/kubepods.slice/cpu.max", "max 100000\n"),
                ("sys/fs/cgroup/kubepods.slice/pod1/cpu.max", "150000 100000\n"),
                (
                    "sys/fs/cgroup/kubepods.slice/pod1/cri-abc/cpu.max",
                    "400000 100000\n",
                ),
            ],
        );
        let q = quota(&root).unwrap();
        assert_eq!(q.cpus, 1.5, "the parent's 1.5 CPUs bind the child's 4");
        assert_eq!(q.file, "/sys/fs/cgroup/kubepods.slice/pod1/cpu.max");
        assert_eq!(limit(64, Some(q)).usable, 2, "⌈1.5⌉");

        // "max" everywhere: no limit.
        let root = tree(
            "v2-max",
            &[
                ("proc/self/cgroup", "0::/\n"),
                ("proc/self/mountinfo", V2_MOUNT),
                ("sys/fs/cgroup/cpu.max", "max 100000\n"),
            ],
        );
        assert_eq!(cpus(&root), None);
    }

    #[test]
    fn v2_in_a_cgroup_namespace_and_at_another_mount_point() {
        // Docker with a cgroup namespace: "0::/" and the container's own cgroup mounted.
        let root = tree(
            "v2-ns",
            &[
                ("proc/self/cgroup", "0::/\n"),
                (
                    "proc/self/mountinfo",
                    "40 35 0:30 / /mnt/cg\\040two rw - cgroup2 cgroup2 rw\n",
                ),
                ("mnt/cg two/cpu.max", "200000 100000"),
            ],
        );
        assert_eq!(cpus(&root), Some(2.0));
        // The mount shows /docker/abc as its root and the process is in it: the mount point's file.
        let root = tree(
            "v2-root",
            &[
                ("proc/self/cgroup", "0::/docker/abc/sub\n"),
                (
                    "proc/self/mountinfo",
                    "40 35 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
                ),
                ("sys/fs/cgroup/cpu.max", "50000 100000"),
                ("sys/fs/cgroup/sub/cpu.max", "max 100000"),
            ],
        );
        let q = quota(&root).unwrap();
        assert_eq!((q.cpus, q.file.as_str()), (0.5, "/sys/fs/cgroup/cpu.max"));
        assert_eq!(limit(8, Some(q)).usable, 1, "half a CPU: one thread");
    }

    #[test]
    fn v1_reads_the_cpu_controllers_cfs_quota() {
        let mounts = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                      32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                      35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let dir = "sys/fs/cgroup/cpu,cpuacct/docker/abc";
        let root = tree(
            "v1",
            &[
                (
                    "proc/self/cgroup",
                    "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n",
                ),
                ("proc/self/mountinfo", mounts),
                (&format!("{dir}/cpu.cfs_quota_us"), "300000\n"),
                (&format!("{dir}/cpu.cfs_period_us"), "100000\n"),
                ("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n"),
                ("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n"),
                // The memory controller's files are not the cpu's.
                ("sys/fs/cgroup/memory/docker/abc/cpu.cfs_quota_us", "10000\n"),
                ("sys/fs/cgroup/memory/docker/abc/cpu.cfs_period_us", "100000\n"),
            ],
        );
        let q = quota(&root).unwrap();
        assert_eq!(q.cpus, 3.0);
        assert_eq!(q.file, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us");
        assert_eq!(limit(2, Some(q)).usable, 2, "the affinity mask is smaller");
    }

    #[test]
    fn missing_unreadable_or_garbage_files_set_no_limit() {
        assert_eq!(cpus(&tree("none", &[])), None);
        let only_cgroup = [("proc/self/cgroup", "0::/\n")];
        assert_eq!(cpus(&tree("no-mountinfo", &only_cgroup)), None);
        let no_file = [("proc/self/cgroup", "0::/a\n"), ("proc/self/mountinfo", V2_MOUNT)];
        assert_eq!(cpus(&tree("no-cpu-max", &no_file)), None);
        for (i, garbage) in [
            "",
            "lots 100000",
            "-5 100000",
            "200000 zero",
            "200000 0",
            "0 100000",
            "\u{0}\u{1}",
        ]
        .iter()
        .enumerate()
        {
            let root = tree(
                &format!("garbage{i}"),
                &[
                    ("proc/self/cgroup", "0::/\n"),
                    ("proc/self/mountinfo", V2_MOUNT),
                    ("sys/fs/cgroup/cpu.max", garbage),
                ],
            );
            assert_eq!(cpus(&root), None, "{garbage:?}");
        }
        // Lines that are not mountinfo or cgroup lines are skipped.
        let root = tree(
            "bad-lines",
            &[
                ("proc/self/cgroup", "nonsense\n::\n0::/\n"),
                ("proc/self/mountinfo", "x\n - cgroup2\n1 2 3 - cgroup2 c rw\n"),
            ],
        );
        assert_eq!(cpus(&root), None);
        // v1 with a quota but no period file: no limit.
        let root = tree(
            "v1-half",
            &[
                ("proc/self/cgroup", "1:cpu:/\n"),
                (
                    "proc/self/mountinfo",
                    "32 31 0:29 / /c rw - cgroup cgroup rw,cpu\n",
                ),
                ("c/cpu.cfs_quota_us", "100000\n"),
            ],
        );
        assert_eq!(cpus(&root), None);
    }

    #[test]
    fn limit_is_at_least_one_and_at_most_the_affinity_mask() {
        let q = |cpus| {
            Some(Quota {
                cpus,
                file: String::new(),
            })
        };
        assert_eq!(limit(64, None).usable, 64);
        assert_eq!(limit(64, q(2.0)).usable, 2);
        assert_eq!(limit(64, q(0.01)).usable, 1);
        assert_eq!(limit(4, q(1e30)).usable, 4);
        assert_eq!(limit(0, None).usable, 1);
        assert!(usable().usable >= 1 && usable().usable <= usable().affinity);
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(cpu_list_count("0-3,8,10-11"), Some(7));
        assert_eq!(cpu_list_count("0"), Some(1));
        assert_eq!(cpu_list_count("3-1"), None);
        assert_eq!(cpu_list_count("x"), None);
        assert_eq!(cpu_list_count(""), None);
    }
}
