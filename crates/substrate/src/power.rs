//! Power-loss simulation for `wal` pools (`crash-sim` feature, for tests).
//!
//! A [`PowerLog`] attached to an open `wal` pool ([`crate::Pool::record_power`]) records
//! every write, length change and `fdatasync` the pool makes to its two files, in order,
//! plus marks the test adds (an operation acknowledged). From the files as they were when
//! it was attached, [`PowerLog::crash_files`] builds what a power cut after any prefix of
//! those events leaves on the device: every event of a file up to that file's last
//! completed `fdatasync` is there; every later one is dropped, kept, or — for writes —
//! torn at 512-byte sector granularity, each sector of it independently old or new, as
//! the chosen [`Tear`] says. That is the weakest thing a disk promises: nothing about
//! unsynced data, and atomicity of no more than a sector.

use crate::wal::WalFile;
use parking_lot::Mutex;

/// A disk sector: the unit a power cut may tear a write at.
pub const SECTOR: u64 = 512;

/// One I/O of a `wal` pool, or a test's mark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PowerEvent {
    Write {
        file: WalFile,
        off: u64,
        data: Vec<u8>,
    },
    SetLen {
        file: WalFile,
        len: u64,
    },
    /// `fdatasync` of the file returned: every earlier event of it is on the device.
    Sync {
        file: WalFile,
    },
    /// Set by the test ([`PowerLog::mark`]), e.g. "operation n acknowledged".
    Mark(u64),
}

/// What a power cut does to the events after a file's last completed sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tear {
    /// None of them reached the device.
    DropAll,
    /// All of them did.
    KeepAll,
    /// Each length change, and each 512-byte sector of each write, independently reached
    /// the device or not, drawn from this seed.
    Sectors(u64),
}

/// The recorded I/O of one pool (see the module documentation).
#[derive(Default)]
pub struct PowerLog {
    events: Mutex<Vec<PowerEvent>>,
}

impl crate::wal::Recorder for PowerLog {
    fn write(&self, file: WalFile, off: u64, data: &[u8]) {
        self.events.lock().push(PowerEvent::Write { file, off, data: data.to_vec() });
    }
    fn set_len(&self, file: WalFile, len: u64) {
        self.events.lock().push(PowerEvent::SetLen { file, len });
    }
    fn sync(&self, file: WalFile) {
        self.events.lock().push(PowerEvent::Sync { file });
    }
}

impl PowerLog {
    /// Record a mark (after the events so far).
    pub fn mark(&self, m: u64) {
        self.events.lock().push(PowerEvent::Mark(m));
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<PowerEvent> {
        self.events.lock().clone()
    }

    /// The crash points worth trying: just before every `fdatasync` returned (index of
    /// the `Sync` event: the events before it happened, it did not), and the end.
    pub fn sync_points(&self) -> Vec<usize> {
        let ev = self.events.lock();
        let mut v: Vec<usize> =
            ev.iter().enumerate().filter(|(_, e)| matches!(e, PowerEvent::Sync { .. })).map(|(i, _)| i).collect();
        v.push(ev.len());
        v
    }

    /// The marks among the first `cut` events.
    pub fn marks_before(&self, cut: usize) -> Vec<u64> {
        self.events.lock()[..cut]
            .iter()
            .filter_map(|e| if let PowerEvent::Mark(m) = e { Some(*m) } else { None })
            .collect()
    }

    /// Every image of the files a power cut can leave, as the tests of a store over a
    /// `wal` pool check them: at each of [`sync_points`](Self::sync_points), with every
    /// unsynced write dropped, kept, and torn at sectors (one draw). `f` gets a label for
    /// messages, the highest mark before the cut (what was acknowledged by then), and the
    /// pool file and log file ([`crash_files`](Self::crash_files)). Returns the images made.
    pub fn each_image(&self, pool0: &[u8], log0: &[u8], mut f: impl FnMut(&str, u64, Vec<u8>, Vec<u8>)) -> usize {
        let points = self.sync_points();
        let mut images = 0;
        for &cut in &points {
            let acked = self.marks_before(cut).into_iter().max().unwrap_or(0);
            for tear in [Tear::DropAll, Tear::KeepAll, Tear::Sectors(cut as u64 * 31 + 7)] {
                let (p, l) = self.crash_files(pool0, log0, cut, tear);
                f(&format!("cut {cut} of {}, {tear:?}", points.len() - 1), acked, p, l);
                images += 1;
            }
        }
        images
    }

    /// The pool file and log file a power cut after the first `cut` events leaves, from
    /// their contents `pool0`/`log0` when the recorder was attached (both synced then).
    pub fn crash_files(&self, pool0: &[u8], log0: &[u8], cut: usize, tear: Tear) -> (Vec<u8>, Vec<u8>) {
        let ev = &self.events.lock()[..cut];
        let mut rng = match tear {
            Tear::Sectors(seed) => seed | 1,
            _ => 1,
        };
        let mut coin = move || {
            // xorshift64: enough to pick sectors; no dependency for a test aid.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng & 1 == 1
        };
        let mut out = [pool0.to_vec(), log0.to_vec()];
        for (fi, which) in [WalFile::Pool, WalFile::Log].into_iter().enumerate() {
            let last_sync = ev.iter().rposition(|e| matches!(e, PowerEvent::Sync { file } if *file == which));
            let f = &mut out[fi];
            for (i, e) in ev.iter().enumerate() {
                let synced = last_sync.is_some_and(|s| i < s);
                match e {
                    PowerEvent::Write { file, off, data } if *file == which => {
                        let end = off + data.len() as u64;
                        if f.len() < end as usize && (synced || tear != Tear::DropAll) {
                            // A write past the end extends the file (a torn one with
                            // zeroes where its sectors did not land).
                            f.resize(end as usize, 0);
                        }
                        let mut s = off - off % SECTOR;
                        while s < end {
                            let a = s.max(*off);
                            let b = (s + SECTOR).min(end);
                            let lands = synced
                                || match tear {
                                    Tear::DropAll => false,
                                    Tear::KeepAll => true,
                                    Tear::Sectors(_) => coin(),
                                };
                            if lands && (b as usize) <= f.len() {
                                f[a as usize..b as usize]
                                    .copy_from_slice(&data[(a - off) as usize..(b - off) as usize]);
                            }
                            s += SECTOR;
                        }
                    }
                    PowerEvent::SetLen { file, len } if *file == which => {
                        let lands = synced
                            || match tear {
                                Tear::DropAll => false,
                                Tear::KeepAll => true,
                                Tear::Sectors(_) => coin(),
                            };
                        if lands {
                            f.resize(*len as usize, 0);
                        }
                    }
                    _ => {}
                }
            }
        }
        let [p, l] = out;
        (p, l)
    }
}
