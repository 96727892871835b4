//! What size of pages the pools of a benchmark get, said beside its figures.
//!
//! A pool on /dev/shm is a tmpfs file, mapped with 4 KiB pages unless that tmpfs was
//! mounted with `huge=` (or the kernel forces huge pages on every tmpfs): each PM access
//! of a random operation is then a TLB miss, and under a hypervisor a two-level page walk.
//! Real PM mapped from a DAX file system, and a tmpfs mounted `huge=within_size`, give
//! 2 MiB pages instead (pmkv asks for them with `MADV_HUGEPAGE`). On this kind of machine
//! that moves NBTree's searches of 4M keys by a fifth (docs/results/pool-pages.md), so a figure
//! without its page size is not comparable.

use std::path::Path;

/// One line on the page size that pools in `dir` get, read from the mount table (the
/// file system and its `huge=` option) and the kernel's tmpfs policy.
pub fn pool_pages(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return "pool pages: unknown (no /proc/self/mountinfo)".into();
    };
    let Some((point, fstype, opts)) = mount_of(&info, &dir) else {
        return "pool pages: unknown (no mount found)".into();
    };
    let policy = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled").unwrap_or_default();
    describe(&point, &fstype, &opts, &policy)
}

/// The mount (point, file system type, super options) holding `dir`: the longest mount
/// point that is `dir` or one of its ancestors (the last one listed, if stacked).
fn mount_of(mountinfo: &str, dir: &Path) -> Option<(String, String, String)> {
    let mut best: Option<(String, String, String)> = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let Some(point) = left.split(' ').nth(4).map(unescape) else { continue };
        let mut r = right.split(' ');
        let Some(fstype) = r.next() else { continue };
        let opts = r.nth(1).unwrap_or("");
        if dir.starts_with(&point) && best.as_ref().is_none_or(|b| point.len() >= b.0.len()) {
            best = Some((point, fstype.to_string(), opts.to_string()));
        }
    }
    best
}

/// Undo mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The line for a mount at `point` of `fstype` with super options `opts`, given the
/// kernel's tmpfs policy file (`shmem_enabled`, the active choice in brackets).
fn describe(point: &str, fstype: &str, opts: &str, policy: &str) -> String {
    let active = policy.split_whitespace().find(|w| w.starts_with('[')).unwrap_or("").trim_matches(['[', ']']);
    match fstype {
        "tmpfs" => {
            let huge = opts.split(',').find_map(|o| o.strip_prefix("huge=")).unwrap_or("never");
            match (active, huge) {
                ("deny", _) => format!("pool pages: 4 KiB (tmpfs at {point}; the kernel denies huge pages to tmpfs)"),
                ("force", _) => format!("pool pages: 2 MiB (tmpfs at {point}; the kernel forces huge pages)"),
                (_, "never") => format!(
                    "pool pages: 4 KiB (tmpfs at {point} without huge=; real PM on DAX, or a tmpfs mounted \
                     -o huge=within_size, gives 2 MiB pages: see scripts/huge-tmpfs)"
                ),
                (_, h) => format!("pool pages: 2 MiB where aligned (tmpfs at {point}, huge={h})"),
            }
        }
        "hugetlbfs" => format!("pool pages: huge pages of hugetlbfs at {point}"),
        other => {
            format!("pool pages: {other} at {point} (the page cache's pages; 2 MiB only with DAX and aligned files)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
30 22 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,size=24684096k
31 22 0:27 / /mnt/h\\040p rw,relatime shared:5 - tmpfs tmpfs rw,size=8388608k,huge=within_size
";

    #[test]
    fn the_deepest_mount_and_its_huge_option_decide() {
        let (p, t, o) = mount_of(INFO, Path::new("/dev/shm/x")).unwrap();
        assert_eq!((p.as_str(), t.as_str()), ("/dev/shm", "tmpfs"));
        assert!(describe(&p, &t, &o, "always within_size advise [never] deny force").starts_with("pool pages: 4 KiB"));
        let (p, t, o) = mount_of(INFO, Path::new("/mnt/h p/pools")).unwrap();
        assert_eq!(p, "/mnt/h p", "octal escapes undone");
        let d = describe(&p, &t, &o, "always within_size advise [never] deny force");
        assert!(d.starts_with("pool pages: 2 MiB") && d.contains("huge=within_size"), "{d}");
        assert!(describe(&p, &t, &o, "always [deny] force").starts_with("pool pages: 4 KiB"));
        assert!(describe("/dev/shm", "tmpfs", "rw", "never [force]").starts_with("pool pages: 2 MiB"));
        let (p, t, _) = mount_of(INFO, Path::new("/var/tmp")).unwrap();
        assert_eq!((p.as_str(), t.as_str()), ("/", "ext4"));
        // "/dev/shmx" is not under "/dev/shm".
        assert_eq!(mount_of(INFO, Path::new("/dev/shmx")).unwrap().0, "/");
    }
}
