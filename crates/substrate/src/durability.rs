//! What an acknowledged write survives, from the medium a pool sits on and its mode.
//!
//! A persistence mode ([`Mode`]) says which instructions make a write durable; whether
//! they reach anything that outlives the machine depends on what the pool file is
//! mapped from. `adr` on real PM (a DAX file system, mapped with `MAP_SYNC`) survives a
//! power loss; the same instructions on a tmpfs file write back cache lines into memory
//! that a reboot wipes. So the durability of a pool is a function of two things, the
//! [`Medium`] (detected at open, see `Medium::of_file`) and the mode (chosen at open),
//! and [`Durability`] is that function, as one table ([`Durability::survives`]). Its
//! reasoning is in docs/design/substrate.md, "What survives what".
//!
//! The library reports, front ends speak: [`Durability::warning`] is the text a front
//! end prints (once, at a read-write open) when the mode promises more than the medium
//! gives; nothing here prints.

use crate::persist::{Mode, SyncPolicy};

/// What a pool's bytes are mapped from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Medium {
    /// A file on a DAX file system, mapped with `MAP_SYNC` (the open's probe succeeded):
    /// the mapping is the persistent memory itself, and the file system's metadata for a
    /// written page is durable once the page fault returns. A flushed line is in the
    /// persistence domain.
    Dax,
    /// A file on a memory file system (tmpfs, ramfs, hugetlbfs): the page cache with no
    /// backing store. It outlives the process, not the kernel.
    Memory,
    /// A file on any other file system: the page cache over a block device (or a network
    /// or FUSE file system), written back by the kernel when it chooses, or by `msync`.
    Disk,
    /// No file: anonymous memory (a crash-simulation pool, or an engine without a pool).
    /// Nothing outlives the process.
    Anonymous,
}

impl Medium {
    pub const ALL: [Medium; 4] = [Medium::Dax, Medium::Memory, Medium::Disk, Medium::Anonymous];

    /// Short name, for `INFO` fields and machine-read output.
    pub fn name(self) -> &'static str {
        match self {
            Medium::Dax => "dax",
            Medium::Memory => "memory",
            Medium::Disk => "disk",
            Medium::Anonymous => "anonymous",
        }
    }

    /// One phrase for people.
    pub fn describe(self) -> &'static str {
        match self {
            Medium::Dax => "persistent memory (a DAX file system, mapped with MAP_SYNC)",
            Medium::Memory => "a memory file system (tmpfs or ramfs: nothing behind the page cache)",
            Medium::Disk => "a disk file system (the page cache, written back by the kernel or by msync)",
            Medium::Anonymous => "anonymous memory (no file)",
        }
    }
}

impl std::fmt::Display for Medium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Something that ends a process's view of its writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// The process dies (a kill, a panic, an abort); the kernel and machine run on.
    ProcessCrash,
    /// The kernel dies (a panic, a hang and a watchdog reset); the machine restarts
    /// without writing back the page cache.
    KernelCrash,
    /// The power goes: nothing is written back that the hardware does not guarantee.
    PowerLoss,
    /// A clean reboot: processes are stopped, file systems are synced and unmounted.
    Reboot,
}

impl Event {
    pub const ALL: [Event; 4] = [Event::ProcessCrash, Event::KernelCrash, Event::PowerLoss, Event::Reboot];

    /// Snake-case name, for `INFO` fields (`pmkv_survives_<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Event::ProcessCrash => "process_crash",
            Event::KernelCrash => "kernel_crash",
            Event::PowerLoss => "power_loss",
            Event::Reboot => "reboot",
        }
    }

    /// Words, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Event::ProcessCrash => "process crash",
            Event::KernelCrash => "kernel crash",
            Event::PowerLoss => "power loss",
            Event::Reboot => "reboot",
        }
    }
}

/// Whether acknowledged writes survive an [`Event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Survives {
    Yes,
    No,
    /// Only if the platform has eADR (its CPU caches are in the persistence domain). No
    /// interface tells software whether it has, so pmkv cannot detect it.
    IfEadr,
    /// All but about the last second of acknowledged writes (mode `wal`, sync policy
    /// `everysec`: the log is made durable once a second). What is kept is a consistent
    /// prefix of the writes.
    AllButLastSecond,
    /// A consistent prefix of the acknowledged writes, of unbounded age (mode `wal`, sync
    /// policy `no`: the log reaches the device when the kernel writes it back, typically
    /// within 30 s, or at a checkpoint or close). Acknowledged writes may be lost; the
    /// pool is never left inconsistent.
    Prefix,
}

impl Survives {
    /// `yes`, `no`, `if-eadr`, `all-but-last-second` or `prefix`.
    pub fn name(self) -> &'static str {
        match self {
            Survives::Yes => "yes",
            Survives::No => "no",
            Survives::IfEadr => "if-eadr",
            Survives::AllButLastSecond => "all-but-last-second",
            Survives::Prefix => "prefix",
        }
    }

    /// The C API's number for it (`struct pmkv_durability`): 1 yes, 0 no, negative for
    /// the conditional and partial answers (-1 if-eadr, -2 all-but-last-second, -3
    /// prefix), so that `> 0` alone means "every acknowledged write survives".
    pub fn code(self) -> i32 {
        match self {
            Survives::Yes => 1,
            Survives::No => 0,
            Survives::IfEadr => -1,
            Survives::AllButLastSecond => -2,
            Survives::Prefix => -3,
        }
    }
}

/// The durability of a pool: its medium, mode and (in mode `wal`) sync policy, and what
/// follows from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Durability {
    pub medium: Medium,
    pub mode: Mode,
    /// When a `wal` pool acknowledges a write; `None` in every other mode, where a write
    /// is as durable as it will be when its operation returns.
    pub sync: Option<SyncPolicy>,
}

impl Durability {
    /// The durability of `mode` on `medium`; in mode `wal`, with sync policy `always`
    /// (the default; [`with_sync`](Self::with_sync) says another).
    pub fn new(medium: Medium, mode: Mode) -> Durability {
        let sync = (mode == Mode::Wal).then_some(SyncPolicy::Always);
        Durability { medium, mode, sync }
    }

    /// The same with sync policy `policy`, which only mode `wal` has (ignored in others).
    pub fn with_sync(self, policy: SyncPolicy) -> Durability {
        Durability { sync: self.sync.map(|_| policy), ..self }
    }

    /// The mode, and the sync policy of mode `wal`: `adr`, `wal (sync everysec)`.
    pub fn label(&self) -> String {
        match self.sync {
            Some(p) => format!("{} (sync {p})", self.mode),
            None => self.mode.to_string(),
        }
    }

    /// Whether a write acknowledged (its operation returned) survives `event`.
    ///
    /// The table, and why (docs/design/substrate.md, "What survives what", says it in
    /// full):
    ///
    /// * a **process crash** loses nothing that reached a shared file mapping: the page
    ///   cache (or PM) belongs to the kernel, and the CPU caches stay coherent with it. So
    ///   every mode on every file medium survives it; anonymous memory dies with the
    ///   process.
    /// * a **reboot** syncs and unmounts file systems: the page cache of a disk file is
    ///   written back, so every mode survives it on `Disk`; tmpfs is gone. On `Dax` only
    ///   what reached PM survives, as for a power loss (next point): a `MAP_SYNC` mapping's
    ///   pages are not tracked dirty, so neither the sync nor the reset writes back lines
    ///   still in the CPU caches, unless the platform has eADR.
    /// * a **kernel crash** and a **power loss** keep only what reached the device: on a
    ///   disk file only what `msync` wrote (the `msync` mode, at every commit) or what the
    ///   `wal` mode's log made durable: every acknowledged write with sync policy
    ///   `always`, all but about the last second with `everysec`
    ///   ([`Survives::AllButLastSecond`]), a consistent prefix of unbounded age with `no`
    ///   ([`Survives::Prefix`]); on DAX
    ///   what `adr` flushed or `wal` wrote and synced, or, on eADR hardware (which pmkv cannot detect), what was
    ///   merely stored (`eadr`, and `msync`, which issues no flush and whose `msync` of a
    ///   `MAP_SYNC` mapping writes nothing back); `none` orders nothing, so a partial
    ///   write-back may leave any state. Memory file systems keep nothing.
    pub fn survives(&self, event: Event) -> Survives {
        use Survives::*;
        // What the `wal` log keeps through a kernel crash or power loss, by policy. A
        // process crash loses nothing (a write is acknowledged only once its record
        // reached the kernel), and a clean reboot syncs the log with the file system.
        let wal = match self.sync.unwrap_or_default() {
            SyncPolicy::Always => Yes,
            SyncPolicy::Everysec => AllButLastSecond,
            SyncPolicy::No => Prefix,
        };
        match (self.medium, event) {
            (Medium::Anonymous, _) => No,
            (_, Event::ProcessCrash) => Yes,
            (Medium::Memory, _) => No,
            (Medium::Disk, Event::Reboot) => Yes,
            // Kernel crash or power loss:
            (Medium::Disk, _) => match self.mode {
                Mode::Msync => Yes,
                Mode::Wal => wal,
                Mode::Adr | Mode::Eadr | Mode::None => No,
            },
            (Medium::Dax, Event::Reboot) if self.mode == Mode::Wal => Yes,
            // Kernel crash, power loss or reboot:
            (Medium::Dax, _) => match self.mode {
                Mode::Adr => Yes,
                Mode::Wal => wal,
                Mode::Eadr | Mode::Msync => IfEadr,
                Mode::None => No,
            },
        }
    }

    /// [`survives`](Self::survives) for every event, in [`Event::ALL`] order.
    pub fn table(&self) -> [(Event, Survives); 4] {
        Event::ALL.map(|e| (e, self.survives(e)))
    }

    /// Whether the mode promises durability the medium does not give: `adr`, `eadr` and
    /// `msync` each promise that an acknowledged write survives a power loss (`none`
    /// promises nothing). `eadr` on DAX is not flagged: choosing it says the hardware has
    /// eADR, which pmkv cannot check ([`Survives::IfEadr`] says so instead). `msync` on
    /// DAX is: it holds only on eADR hardware, and nothing in choosing it says the
    /// hardware has that.
    pub fn over_promises(&self) -> bool {
        if self.mode == Mode::None || self.medium == Medium::Anonymous {
            return false;
        }
        match self.survives(Event::PowerLoss) {
            Survives::No => true,
            Survives::IfEadr => self.mode != Mode::Eadr,
            // What the sync policy promises, no more: `everysec` and `no` say so.
            Survives::Yes | Survives::AllButLastSecond | Survives::Prefix => false,
        }
    }

    /// What a front end should tell the user at a read-write open, once, if the mode
    /// promises more than the medium gives ([`over_promises`](Self::over_promises)).
    pub fn warning(&self) -> Option<&'static str> {
        if !self.over_promises() {
            return None;
        }
        // Short (a user reads it on every write command): the mode, what it survives and
        // what not, and the mode that keeps the promise. `pmkv info` has the whole table.
        Some(match (self.medium, self.mode) {
            (Medium::Memory, _) => {
                "on a memory file system (tmpfs) writes survive a process crash only, in any mode: a reboot, \
                 kernel crash or power loss loses them; put the pool on a disk or PM"
            }
            (Medium::Dax, _) => {
                "mode msync on persistent memory survives a power loss only on eADR hardware; mode adr flushes \
                 each write and survives it everywhere"
            }
            (_, Mode::Adr) => {
                "mode adr on a disk file survives a process crash, not a kernel crash or power loss (which may \
                 leave the pool inconsistent); mode wal survives both"
            }
            _ => {
                "mode eadr on a disk file survives a process crash, not a kernel crash or power loss (which may \
                 leave the pool inconsistent); mode wal survives both"
            }
        })
    }

    /// One line: `process crash yes, kernel crash no, power loss no, reboot yes`.
    pub fn summary(&self) -> String {
        self.table().iter().map(|(e, s)| format!("{} {}", e.describe(), s.name())).collect::<Vec<_>>().join(", ")
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} in {}: {}", self.label(), self.medium, self.summary())
    }
}

#[cfg(test)]
mod tests {
    use super::Survives::*;
    use super::*;

    fn row(medium: Medium, mode: Mode) -> [Survives; 4] {
        Durability::new(medium, mode).table().map(|(_, s)| s)
    }

    #[test]
    fn every_mode_on_a_disk_file_survives_a_process_crash_and_a_reboot_only_msync_more() {
        for mode in [Mode::Adr, Mode::Eadr, Mode::None] {
            assert_eq!(row(Medium::Disk, mode), [Yes, No, No, Yes], "{mode}");
        }
        assert_eq!(row(Medium::Disk, Mode::Msync), [Yes, Yes, Yes, Yes]);
        assert_eq!(row(Medium::Disk, Mode::Wal), [Yes, Yes, Yes, Yes]);
    }

    #[test]
    fn wal_keeps_through_a_power_loss_what_its_sync_policy_made_durable() {
        let wal = |medium, p| Durability::new(medium, Mode::Wal).with_sync(p).table().map(|(_, s)| s);
        for medium in [Medium::Disk, Medium::Dax] {
            assert_eq!(wal(medium, SyncPolicy::Always), [Yes, Yes, Yes, Yes], "{medium}");
            assert_eq!(wal(medium, SyncPolicy::Everysec), [Yes, AllButLastSecond, AllButLastSecond, Yes]);
            assert_eq!(wal(medium, SyncPolicy::No), [Yes, Prefix, Prefix, Yes], "{medium}");
        }
        for p in SyncPolicy::ALL {
            assert_eq!(wal(Medium::Memory, p), [Yes, No, No, No], "{p}");
            assert_eq!(wal(Medium::Anonymous, p), [No; 4], "{p}");
            // Each policy keeps what it promises: no warning.
            for medium in Medium::ALL {
                assert_eq!(
                    Durability::new(medium, Mode::Wal).with_sync(p).warning().is_some(),
                    medium == Medium::Memory
                );
            }
            // Only mode wal has a sync policy.
            assert_eq!(Durability::new(Medium::Disk, Mode::Adr).with_sync(p).sync, None);
        }
        let d = Durability::new(Medium::Disk, Mode::Wal).with_sync(SyncPolicy::Everysec);
        assert_eq!(
            d.to_string(),
            "wal (sync everysec) in disk: process crash yes, kernel crash all-but-last-second, \
             power loss all-but-last-second, reboot yes"
        );
        assert_eq!(Durability::new(Medium::Disk, Mode::Wal).label(), "wal (sync always)");
        assert_eq!(Durability::new(Medium::Disk, Mode::Msync).label(), "msync");
        // The C API's numbers: only a full yes is positive.
        let codes = [Yes, No, IfEadr, AllButLastSecond, Prefix].map(Survives::code);
        assert_eq!(codes, [1, 0, -1, -2, -3]);
    }

    #[test]
    fn memory_file_systems_keep_writes_across_a_process_crash_only() {
        for mode in Mode::ALL {
            assert_eq!(row(Medium::Memory, mode), [Yes, No, No, No], "{mode}");
        }
    }

    #[test]
    fn dax_survives_power_loss_in_adr_and_in_eadr_and_msync_only_on_eadr_hardware() {
        assert_eq!(row(Medium::Dax, Mode::Adr), [Yes, Yes, Yes, Yes]);
        assert_eq!(row(Medium::Dax, Mode::Wal), [Yes, Yes, Yes, Yes]);
        assert_eq!(row(Medium::Dax, Mode::Msync), [Yes, IfEadr, IfEadr, IfEadr]);
        assert_eq!(row(Medium::Dax, Mode::Eadr), [Yes, IfEadr, IfEadr, IfEadr]);
        assert_eq!(row(Medium::Dax, Mode::None), [Yes, No, No, No]);
    }

    #[test]
    fn anonymous_memory_keeps_nothing() {
        for mode in Mode::ALL {
            assert_eq!(row(Medium::Anonymous, mode), [No; 4], "{mode}");
        }
    }

    #[test]
    fn a_warning_exactly_where_a_mode_promises_a_power_loss_the_medium_does_not_give() {
        for medium in Medium::ALL {
            for mode in Mode::ALL {
                let d = Durability::new(medium, mode);
                let expect = match (medium, mode) {
                    (_, Mode::None) | (Medium::Anonymous, _) => false,
                    (Medium::Memory, _) => true,
                    (Medium::Disk, m) => !matches!(m, Mode::Msync | Mode::Wal),
                    (Medium::Dax, m) => m == Mode::Msync,
                };
                assert_eq!(d.warning().is_some(), expect, "{d}");
                assert_eq!(d.over_promises(), expect, "{d}");
            }
        }
        let w = Durability::new(Medium::Disk, Mode::Adr).warning().unwrap();
        assert!(w.contains("adr") && w.contains("wal") && w.contains("power loss"), "{w}");
        let w = Durability::new(Medium::Disk, Mode::Eadr).warning().unwrap();
        assert!(w.contains("eadr") && w.contains("wal"), "{w}");
        let w = Durability::new(Medium::Memory, Mode::Msync).warning().unwrap();
        assert!(w.contains("tmpfs") && w.contains("reboot"), "{w}");
        // Short enough to read on every write command.
        for m in Medium::ALL {
            for mode in Mode::ALL {
                let w = Durability::new(m, mode).warning().unwrap_or("");
                assert!(w.len() <= 170, "{} characters: {w}", w.len());
            }
        }
        let w = Durability::new(Medium::Dax, Mode::Msync).warning().unwrap();
        assert!(w.contains("msync") && w.contains("eADR") && w.contains("adr flushes"), "{w}");
    }

    #[test]
    fn the_summary_names_every_event() {
        let d = Durability::new(Medium::Disk, Mode::Adr);
        assert_eq!(d.summary(), "process crash yes, kernel crash no, power loss no, reboot yes");
        assert_eq!(d.to_string(), "adr in disk: process crash yes, kernel crash no, power loss no, reboot yes");
        assert_eq!(Durability::new(Medium::Dax, Mode::Eadr).survives(Event::PowerLoss).name(), "if-eadr");
    }
}
