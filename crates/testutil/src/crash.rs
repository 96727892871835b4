//! What the checks of crash images found, collected by a crash simulator hook and
//! asserted by the test.

use pmkv_substrate::{CrashPoint, Eviction};
use std::sync::{Arc, Mutex, MutexGuard};

/// Failure messages kept (all failures are counted).
const KEEP: usize = 10;

#[derive(Default)]
struct Findings {
    images: u64,
    failed: u64,
    first: Vec<String>,
}

/// Crash images checked and failures found, shared (by clone) between a test and the
/// hook it installs: the hook calls [`CrashFindings::check_images`] at a crash point, the
/// test calls [`CrashFindings::assert_none`] when the run is over.
#[derive(Clone, Default)]
pub struct CrashFindings(Arc<Mutex<Findings>>);

impl CrashFindings {
    /// Nothing checked yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Findings> {
        // A panicking check elsewhere must not hide what was found.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the crash image of `pt` under each of `evictions` and run `check` on it,
    /// recording each error as "`context` at point N (kind, eviction): error".
    pub fn check_images(
        &self,
        pt: &CrashPoint<'_>,
        evictions: impl IntoIterator<Item = Eviction>,
        context: &str,
        mut check: impl FnMut(&[u8]) -> Result<(), String>,
    ) {
        for ev in evictions {
            let result = check(&pt.image(ev));
            let mut f = self.lock();
            f.images += 1;
            if let Err(e) = result {
                f.failed += 1;
                if f.first.len() < KEEP {
                    let at = if context.is_empty() { String::new() } else { format!("{context} at ") };
                    f.first.push(format!("{at}point {} ({:?}, {ev:?}): {e}", pt.index, pt.kind));
                }
            }
        }
    }

    /// [`CrashFindings::check_images`] with every eviction a thorough check takes at `pt`:
    /// the four standard ones and the deterministic adversarial ones over its pending
    /// lines ([`CrashPoint::evictions`] with [`Eviction::SINGLE_LINES`]), so that a missing
    /// fence between two flushes is caught at every point, whatever the seed.
    pub fn check_point(&self, pt: &CrashPoint<'_>, context: &str, check: impl FnMut(&[u8]) -> Result<(), String>) {
        self.check_images(pt, pt.evictions(Eviction::SINGLE_LINES), context, check)
    }

    /// Crash images checked so far.
    pub fn images(&self) -> u64 {
        self.lock().images
    }

    /// Images whose check failed so far.
    pub fn failed(&self) -> u64 {
        self.lock().failed
    }

    /// Fail the test, saying `what` and listing the first failures, if any image failed.
    #[track_caller]
    pub fn assert_none(&self, what: &str) {
        let f = self.lock();
        assert!(f.failed == 0, "{what}: {} of {} crash images fail:\n{}", f.failed, f.images, f.first.join("\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Persist `n` words of a fresh simulated pool, one after the other, with `hook` at
    /// every fence (and flush, with `on_flush`).
    fn persist_words(n: u64, on_flush: bool, hook: impl FnMut(&CrashPoint<'_>) + Send + 'static) {
        let (pool, off) = crate::test_pool(4096);
        pool.sim().unwrap().set_hook(on_flush, hook);
        for i in 0..n {
            pool.persist_off(off + 64 * i, 8);
        }
        pool.sim().unwrap().clear_hook();
    }

    fn panic_message(f: impl FnOnce()) -> String {
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("a panic");
        e.downcast_ref::<String>().cloned().expect("a formatted panic message")
    }

    #[test]
    fn findings_count_images_and_keep_the_first_failures() {
        let found = CrashFindings::new();
        let f = found.clone();
        persist_words(20, true, move |pt| {
            f.check_images(pt, Eviction::standard(pt.index), "write", |img| {
                if img.len() < 4096 {
                    return Err("image too small".into());
                }
                if pt.index % 2 == 1 {
                    Err("odd point".into())
                } else {
                    Ok(())
                }
            })
        });
        // Each persist is a flush point and a fence point; four images each.
        assert_eq!(found.images(), 20 * 2 * 4);
        assert_eq!(found.failed(), 20 * 4, "every image of the odd points");
        let msg = panic_message(|| found.assert_none("writes"));
        assert!(msg.starts_with("writes: 80 of 160 crash images fail:\nwrite at point "), "{msg}");
        assert!(msg.ends_with("odd point"), "{msg}");
        assert_eq!(msg.lines().count(), 1 + KEEP, "the first {KEEP} failures are listed");
    }

    #[test]
    fn check_point_takes_the_adversarial_images_too() {
        let found = CrashFindings::new();
        let f = found.clone();
        // One flush and one fence per word, one line pending at each: 4 standard images
        // and `OnlyNewest`.
        persist_words(3, true, move |pt| f.check_point(pt, "", |_| Ok(())));
        assert_eq!(found.images(), 3 * 2 * 5);
        // A check that fails only on the image holding exactly the newest pending line.
        let found = CrashFindings::new();
        let f = found.clone();
        persist_words(3, true, move |pt| {
            let newest = pt.image(Eviction::OnlyNewest);
            f.check_point(pt, "", |img| if img == newest.as_slice() { Err("newest".into()) } else { Ok(()) })
        });
        assert!(found.failed() >= 6, "{}", found.failed());
    }

    #[test]
    fn assert_none_fails_with_the_messages() {
        let found = CrashFindings::new();
        let f = found.clone();
        persist_words(1, false, move |pt| f.check_images(pt, [Eviction::None], "", |_| Err("bad".into())));
        let msg = panic_message(|| found.assert_none("the log broke"));
        assert!(msg.starts_with("the log broke: 1 of 1 crash images fail:\npoint "), "{msg}");
        assert!(msg.ends_with("(Fence, None): bad"), "{msg}");
        let clean = CrashFindings::new();
        clean.assert_none("nothing checked, nothing failed");
    }
}
