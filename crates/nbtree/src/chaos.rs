//! Schedule perturbation for the randomized-schedule test (feature `chaos`).
//!
//! The SMO protocol's races are narrow windows between two atomic steps (a freeze and the
//! copy's CAS, the PM link and the DRAM link, a value store and the re-read of its payload).
//! On two cores a plain stress test rarely lands a thread in one of them while another
//! acts. With the feature on, each such window calls [`point`], which yields the thread
//! (or spins a while) at random, so that other threads run inside the window; the
//! many-thread test `n4_randomized_schedules_small_tree` (tests/concurrent.rs) then
//! checks every returned value against per-thread models. Shuttle or loom would explore
//! schedules systematically, but they need every atomic and the epoch scheme replaced by
//! theirs (crossbeam-epoch and the pool's PM atomics are outside their model); this is
//! the randomized substitute, and it is stated as such in docs/design/nbtree.md ("Tests"). Without the
//! feature, `point` is an empty inline function.

#[cfg(feature = "chaos")]
static ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turn the perturbation on or off for the whole process (feature `chaos` only; off by
/// default, so that a build with every feature, as the test command makes, runs the other
/// tests at full speed).
#[cfg(feature = "chaos")]
pub fn enable(on: bool) {
    ON.store(on, std::sync::atomic::Ordering::Relaxed);
}

#[cfg(feature = "chaos")]
pub(crate) fn point() {
    use std::cell::Cell;
    if !ON.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    thread_local! {
        static RNG: Cell<u64> = Cell::new({
            let t = std::thread::current().id();
            let h = format!("{t:?}").bytes().fold(0x9e37_79b9_7f4a_7c15u64, |a, b| (a ^ b as u64).wrapping_mul(0x100_0000_01b3));
            h | 1
        });
    }
    let r = RNG.with(|c| {
        let mut x = c.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c.set(x);
        x
    });
    match r % 8 {
        0 => std::thread::yield_now(),
        1 => {
            for _ in 0..(r >> 8) % 2000 {
                std::hint::spin_loop();
            }
        }
        _ => {}
    }
}

#[cfg(not(feature = "chaos"))]
#[inline(always)]
pub(crate) fn point() {}
