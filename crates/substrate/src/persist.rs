//! Persistence primitives (SPEC P3): the only place in pmkv that issues cache-line flushes
//! and store fences. Engines call [`crate::Pool::flush_off`], [`crate::Pool::fence`] and
//! [`crate::Pool::persist_off`]; the pool dispatches on its [`Mode`] to the functions here.
//!
//! * `adr`  — only the memory controller is in the persistence domain: each dirty line is
//!   written back with `clwb` (keeps the line cached on CPUs that implement it so),
//!   else `clflushopt`, else `clflush`, chosen once per process from CPUID, and the
//!   write-backs are ordered with `sfence`.
//! * `eadr` — caches are in the persistence domain: a store is durable once it is globally
//!   visible, so only the fence (ordering) remains.
//! * `msync` — an ordinary file system: dirty pages are written with `msync(MS_SYNC)` at
//!   each fence (the commit points of the engines).
//! * `wal` — an ordinary file system, with a redo log and group commit: the pool file is
//!   mapped privately, each fence appends the lines flushed since the thread's last fence
//!   to a log buffer, and a group of writers shares one `fdatasync` of the log (see the
//!   `wal` module and docs/design/substrate.md, "Mode wal").
//! * `none` — neither flush nor fence: the volatile baseline for measurements.

use std::sync::OnceLock;

/// Cache-line size assumed for PM. Every x86_64 CPU pmkv targets uses 64 bytes.
pub const LINE: usize = 64;

/// Persistence mode, chosen when a pool is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Adr,
    Eadr,
    Msync,
    Wal,
    None,
}

impl Mode {
    pub const ALL: [Mode; 5] = [Mode::Adr, Mode::Eadr, Mode::Msync, Mode::Wal, Mode::None];

    /// Whether stores reach the persistence domain only when their line is written back
    /// (`adr`, and `msync` and `wal`, which are simulated like it): then two stores to one line may
    /// persist in either order, and a protocol that needs an order must persist the first
    /// before making the second. In `eadr` (and `none`) stores persist in program order.
    pub fn flushes(self) -> bool {
        matches!(self, Mode::Adr | Mode::Msync | Mode::Wal)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Adr => "adr",
            Mode::Eadr => "eadr",
            Mode::Msync => "msync",
            Mode::Wal => "wal",
            Mode::None => "none",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s.to_ascii_lowercase().as_str() {
            "adr" => Ok(Mode::Adr),
            "eadr" => Ok(Mode::Eadr),
            "msync" => Ok(Mode::Msync),
            "wal" => Ok(Mode::Wal),
            "none" => Ok(Mode::None),
            other => Err(format!("unknown persistence mode '{other}' (expected adr, eadr, msync, wal or none)")),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// When a `wal` pool's writes are acknowledged, like Redis's `appendfsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SyncPolicy {
    /// An operation returns only when its log record is on the device (`fdatasync`
    /// returned): nothing acknowledged is lost by a power loss. Writers waiting at the
    /// same moment share one `fdatasync` (group commit).
    #[default]
    Always,
    /// An operation returns once its record is written to the kernel (survives a process
    /// crash); a background thread makes the log durable every second, so a power loss
    /// loses at most about the last second of acknowledged writes.
    Everysec,
    /// An operation returns once its record is written to the kernel; the log reaches the
    /// device when the kernel writes it back (usually within 30 s) or at a checkpoint or
    /// close. A power loss keeps a consistent prefix of the writes, of unbounded age.
    No,
}

impl SyncPolicy {
    pub const ALL: [SyncPolicy; 3] = [SyncPolicy::Always, SyncPolicy::Everysec, SyncPolicy::No];

    pub fn name(self) -> &'static str {
        match self {
            SyncPolicy::Always => "always",
            SyncPolicy::Everysec => "everysec",
            SyncPolicy::No => "no",
        }
    }
}

impl std::str::FromStr for SyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<SyncPolicy, String> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(SyncPolicy::Always),
            "everysec" => Ok(SyncPolicy::Everysec),
            "no" => Ok(SyncPolicy::No),
            other => Err(format!("unknown sync policy '{other}' (expected always, everysec or no)")),
        }
    }
}

impl std::fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The flush instruction used in `adr` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushInsn {
    Clwb,
    Clflushopt,
    Clflush,
    /// Not an x86_64 CPU: no user-space flush; `adr` degrades to fences only.
    Unsupported,
}

impl FlushInsn {
    pub fn name(self) -> &'static str {
        match self {
            FlushInsn::Clwb => "clwb",
            FlushInsn::Clflushopt => "clflushopt",
            FlushInsn::Clflush => "clflush",
            FlushInsn::Unsupported => "none",
        }
    }
}

/// The best flush instruction this CPU has, detected once from CPUID
/// (leaf 7 EBX bit 24 = CLWB, bit 23 = CLFLUSHOPT; leaf 1 EDX bit 19 = CLFLUSH).
/// `PMKV_FLUSH=clflushopt|clflush` forces a weaker one (for comparisons).
pub fn flush_insn() -> FlushInsn {
    static INSN: OnceLock<FlushInsn> = OnceLock::new();
    *INSN.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> FlushInsn {
    use core::arch::x86_64::__cpuid_count;
    // SAFETY: CPUID is available on every x86_64 CPU.
    #[allow(unused_unsafe)]
    let (leaf7_ebx, leaf1_edx) = unsafe { (__cpuid_count(7, 0).ebx, __cpuid_count(1, 0).edx) };
    let has_clwb = leaf7_ebx & (1 << 24) != 0;
    let has_opt = leaf7_ebx & (1 << 23) != 0;
    let has_clflush = leaf1_edx & (1 << 19) != 0;
    let forced = std::env::var("PMKV_FLUSH").ok();
    match forced.as_deref() {
        Some("clflush") if has_clflush => return FlushInsn::Clflush,
        Some("clflushopt") if has_opt => return FlushInsn::Clflushopt,
        _ => {}
    }
    if has_clwb {
        FlushInsn::Clwb
    } else if has_opt {
        FlushInsn::Clflushopt
    } else if has_clflush {
        FlushInsn::Clflush
    } else {
        FlushInsn::Unsupported
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> FlushInsn {
    FlushInsn::Unsupported
}

/// Write back every cache line overlapping `[addr, addr+len)`; returns the number of lines.
///
/// # Safety
/// The range must be mapped (flushing an unmapped address faults).
#[inline]
pub(crate) unsafe fn flush_lines(addr: usize, len: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = addr & !(LINE - 1);
    let end = addr + len;
    let insn = flush_insn();
    let mut line = first;
    let mut n = 0;
    while line < end {
        // SAFETY: `line` lies in the mapped range the caller vouches for.
        unsafe { flush_one(insn, line) };
        line += LINE;
        n += 1;
    }
    n
}

#[inline(always)]
unsafe fn flush_one(insn: FlushInsn, line: usize) {
    #[cfg(target_arch = "x86_64")]
    match insn {
        // The assembler accepts clwb/clflushopt whatever the target features; we only
        // execute them when CPUID says the CPU has them.
        // SAFETY: the caller guarantees `line` is mapped; `insn` is Clwb only when CPUID
        // reported clwb (`flush_insn`); a write-back changes no memory contents.
        FlushInsn::Clwb => unsafe { core::arch::asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags)) },
        // SAFETY: `line` is mapped (the caller's contract); `insn` is Clflushopt only when
        // CPUID reported clflushopt; write-back and eviction change no memory contents.
        FlushInsn::Clflushopt => unsafe {
            core::arch::asm!("clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags))
        },
        // SAFETY: `line` is mapped (the caller's contract); clflush is baseline SSE2 on
        // x86-64, and it changes no memory contents.
        FlushInsn::Clflush => unsafe { core::arch::x86_64::_mm_clflush(line as *const u8) },
        FlushInsn::Unsupported => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (insn, line);
}

/// Store fence: orders earlier flushes (and non-temporal stores) before later stores.
#[inline(always)]
pub(crate) fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Number of cache lines overlapping `[addr, addr+len)`.
#[inline]
pub fn lines_in(addr: usize, len: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = addr / LINE;
    let last = (addr + len - 1) / LINE;
    (last - first + 1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_round_trip() {
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>().unwrap(), m);
        }
        assert!("disk".parse::<Mode>().is_err());
        for p in SyncPolicy::ALL {
            assert_eq!(p.name().parse::<SyncPolicy>().unwrap(), p);
        }
        assert!("sometimes".parse::<SyncPolicy>().is_err());
    }

    #[test]
    fn line_counting() {
        assert_eq!(lines_in(0, 0), 0);
        assert_eq!(lines_in(0, 64), 1);
        assert_eq!(lines_in(63, 2), 2);
        assert_eq!(lines_in(64, 4096), 64);
    }

    #[test]
    fn flushing_real_memory_works() {
        let v = vec![7u8; 4096];
        // SAFETY: the vector's memory is mapped.
        let n = unsafe { flush_lines(v.as_ptr() as usize, v.len()) };
        sfence();
        assert!(n == 64 || n == 65);
        assert_ne!(flush_insn(), FlushInsn::Unsupported);
    }
}

/// What a crash may leave of the stores an engine made and had not yet persisted: the
/// crash model an engine's correctness assumes, which its crash tests must use.
///
/// * [`CrashModel::Words`] (the default, and the strict one): any subset of a line's
///   dirty 8-byte words may reach PM, in any order. An engine correct under it needs no
///   assumption about the cache beyond PM's 8-byte atomic write.
/// * [`CrashModel::LinesInOrder`]: a dirty line reaches PM whole, holding a *prefix* of
///   the stores made to it since it was last persisted, in program order. This is what
///   x86 gives a line one thread writes: under TSO that thread's stores to the line
///   become visible in program order, and the cache writes a line back as a unit (an
///   eviction, `clwb` or `clflushopt` all write back the whole line as it is at that
///   moment), so what PM holds is the line as it was at some moment: a prefix. FAST&FAIR
///   relies on it (FAST 2018, §4.1: one flush per line during a shift).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CrashModel {
    #[default]
    Words,
    LinesInOrder,
}
