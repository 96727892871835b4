//! [`Durable`]: an ordinary Rust value made durable in a Mangosteen region, its code
//! unchanged; the program's access layer wraps each operation in [`Durable::write`] or
//! [`Durable::read`] (docs/design/mangosteen.md, "The small API").
//!
//! The value lives in the region's persistent heap (the split heap, M7) at an address
//! fixed for the pool's life, so its own pointers (a `HashMap`'s table, a `Vec`'s buffer)
//! stay valid across restarts. Writes are found by page protection: Rust code of the
//! program's cannot be compiled with the engine's instrumentation on stable Rust, and
//! compiler capture over it is refused (see `Mangosteen::open`).

use crate::error::{Error, Result};
use crate::heap::Heap;
use crate::runtime::{Capture, Mangosteen, Options};
use crate::split_alloc::{Registration, SplitAlloc};
use pmkv_substrate::Pool;
use std::any::Any;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// The heap's root block: a tag naming the type, then the value (`Captured`'s layout
/// too, whose tag is computed another way).
type Holder<T> = crate::abi::Root<T>;

/// Run `f` on the value of the root block at region offset `root` of `m`, under the
/// reader side (never beside a batch of writes).
///
/// # Safety
///
/// The block at `root` is a `Holder<T>` inside `m`'s region (its tag checked at open).
pub(crate) unsafe fn read_root<T, R>(m: &Mangosteen, root: usize, f: impl FnOnce(&T) -> R) -> R {
    m.read(|r| {
        // SAFETY: the caller's contract; the reader side keeps writes out for the call.
        let value = unsafe { &(*(r.as_ptr().add(root) as *const Holder<T>)).value };
        f(value)
    })
}

/// A write that found the region's heap full, rolled back.
pub(crate) fn full<T>() -> Error {
    Error::Full(format!(
        "a write to the {} needed more than the region's heap had left; it was rolled back",
        std::any::type_name::<T>()
    ))
}

/// `T`'s name (as the compiler spells it), size and alignment, hashed (FNV-1a): a pool
/// made for another type is refused rather than read as this one.
fn tag<T>() -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in std::any::type_name::<T>().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h ^ ((std::mem::size_of::<T>() as u64) << 40) ^ ((std::mem::align_of::<T>() as u64) << 56)
}

/// A panic of a write's body, caught so that the write can be rolled back first.
/// The payload was allocated in the region (the panic happened inside the heap's scope),
/// which the rollback restores, so only its message, copied outside, is kept.
fn panic_message(p: &(dyn Any + Send)) -> String {
    SplitAlloc::transient(|| match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (None, Some(s)) => s.clone(),
        _ => "a write's body panicked".to_string(),
    })
}

/// Why a write's body was rolled back.
enum Ran {
    Full,
    Panicked(String),
}

/// A `T` kept durable in a Mangosteen pool: [`Durable::write`] runs a closure on it as a
/// durable write, [`Durable::read`] one on it directly, in parallel with other reads.
///
/// Requirements, each checked at open:
/// * the program's global allocator is [`SplitAlloc`] (`#[global_allocator] static A:
///   SplitAlloc = SplitAlloc;`): inside a write it sends `T`'s allocations to the region's
///   heap; without it they would be the system's and lost at the next open;
/// * `Capture::Pages` (the default here): compiler capture sees only instrumented code,
///   which a program's own Rust code is not;
/// * the pool holds a `Durable` of this very `T` (same type name, size and alignment), or
///   none yet (then `T::default()` is made in the first write).
///
/// What the types enforce: a write's closure is `Copy` (it captures references and plain
/// values only), so memory made outside the write cannot be moved into `T` (a `Vec` built
/// before the write would stay the system's and be lost at reopen): clone it in instead;
/// a write's result is `Copy`, so it owns no memory (anything it allocated would be region
/// memory outside the write).
pub struct Durable<T> {
    m: Mangosteen,
    /// The root block's region offset.
    root: usize,
    /// Frees of the region's blocks outside a write are leaked rather than given to the
    /// system. Dropped after `m` (field order), once the region is unmapped.
    _registration: Registration,
    _t: PhantomData<T>,
}

impl<T: Default + Send + Sync + 'static> Durable<T> {
    /// Open the `Durable<T>` in `pool`, making the region (with `opts`' geometry) and a
    /// `T::default()` in it if the pool has none; an existing one is recovered first.
    /// `opts.fixed_address` is set (the value holds pointers); `opts.capture` must be
    /// `Capture::Pages` (`Explicit`, the runtime's default, is taken to mean it).
    pub fn open(pool: Arc<Pool>, mut opts: Options) -> Result<Durable<T>> {
        if !SplitAlloc::installed() {
            return Err(Error::InvalidOption(
                "Durable needs SplitAlloc as the program's global allocator (#[global_allocator] static A: \
                 SplitAlloc = SplitAlloc;): without it the value's allocations would come from the system \
                 allocator, outside the region, and be lost at the next open"
                    .into(),
            ));
        }
        match opts.capture {
            Capture::Explicit => opts.capture = Capture::Pages,
            Capture::Pages => {}
            Capture::Compiler => {
                return Err(Error::NotInstrumented(
                    "Durable runs the program's own Rust code, which is not compiled with capture: use \
                     Capture::Pages (the default); compiler capture would acknowledge writes and lose them"
                        .into(),
                ))
            }
        }
        opts.fixed_address = true;
        let m = Mangosteen::open(pool, opts)?;
        let registration = SplitAlloc::register(m.region_base(), m.size() as usize)
            .ok_or_else(|| Error::InvalidOption("more than 64 Mangosteen regions open in one process".into()))?;
        let want = tag::<T>();
        let made = m.batch(|tx| {
            let r = tx.region();
            // SAFETY: the region, ours for the batch; its heap header is read and, for a
            // new region, written.
            let heap = unsafe { Heap::new(r.as_mut_ptr(), r.len()) };
            if !heap.is_formatted() {
                heap.format();
            }
            match heap.root() as usize {
                0 => {}
                off if off + 8 <= r.len() => {
                    // SAFETY: the root block (`Holder<T>` of some `T`, its tag first),
                    // inside the region (the heap keeps it so, checked just above); the
                    // heap's payloads are 16-byte aligned.
                    let have = unsafe { (r.as_ptr().add(off) as *const u64).read() };
                    return if have == want { Ok(off) } else { Err(have) };
                }
                _ => return Err(0),
            }
            let base = r.as_mut_ptr() as usize;
            let (b, full) = SplitAlloc::scope_checked(heap, || Box::new(Holder { tag: want, value: T::default() }));
            let p = Box::into_raw(b) as usize;
            if full {
                tx.abort();
                return Ok(0);
            }
            heap.set_root((p - base) as u64);
            Ok(p - base)
        });
        let root = match made {
            Ok(Ok(off)) => off,
            Ok(Err(_)) => {
                return Err(Error::InvalidOption(format!(
                    "the pool holds a Durable of another type than {} (or of another size or alignment): open it \
                     with the type it was made with",
                    std::any::type_name::<T>()
                )))
            }
            Err(Error::Aborted) => {
                return Err(Error::Full(format!("no room for a new {} in the region", std::any::type_name::<T>())))
            }
            Err(e) => return Err(e),
        };
        Ok(Durable { m, root, _registration: registration, _t: PhantomData })
    }

    /// Run `f` on the value as a durable write; returns its result once the write is
    /// durable. Concurrent writes are flat-combined into one batch (`f` may run on another
    /// thread). Nothing of a write is committed unless all of it is: a write whose
    /// allocations find the region full is rolled back and returns [`Error::Full`]; one
    /// whose `f` panics is rolled back and the panic is raised again here (with its
    /// message; the payload itself lay in the region).
    pub fn write<R, F>(&self, f: F) -> Result<R>
    where
        F: FnOnce(&mut T) -> R + Send + Copy,
        R: Copy + Send,
    {
        let root = self.root;
        loop {
            // Why the write aborted, when it did (`batch` returns only `Aborted` then).
            let mut why: Option<Ran> = None;
            let why_ref = &mut why;
            let ran = self.m.batch(move |tx| {
                let r = tx.region();
                let base = r.as_mut_ptr();
                // SAFETY: the region, ours for the batch, holds a formatted heap (open).
                let heap = unsafe { Heap::new(base, r.len()) };
                // SAFETY: the root block is a `Holder<T>` (its tag checked at open), in the
                // region, and the batch gives this request the only access to it.
                let value = unsafe { &mut (*(base.add(root) as *mut Holder<T>)).value };
                let (out, full) =
                    SplitAlloc::scope_checked(heap, || std::panic::catch_unwind(AssertUnwindSafe(|| f(value))));
                match out {
                    Ok(v) if !full => return Some(v),
                    Ok(_) => *why_ref = Some(Ran::Full),
                    Err(p) => {
                        let msg = panic_message(&*p);
                        // Region memory that the rollback gives back to the heap: never
                        // dropped.
                        std::mem::forget(p);
                        *why_ref = Some(Ran::Panicked(msg));
                    }
                }
                tx.abort();
                None
            });
            return match ran {
                Ok(Some(v)) => Ok(v),
                // Another request of the batch aborted: nothing of this one was applied.
                Err(Error::RolledBack) => continue,
                Ok(None) | Err(Error::Aborted) => match why {
                    Some(Ran::Panicked(msg)) => panic!("{msg} (the write was rolled back)"),
                    _ => Err(full::<T>()),
                },
                Err(e) => Err(e),
            };
        }
    }

    /// Run `f` on the value, in parallel with other reads and never beside a batch of
    /// writes; returns its result (anything: reads allocate from the system).
    pub fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        // SAFETY: the root block is a `Holder<T>` (tag checked at open) in the region.
        unsafe { read_root(&self.m, self.root, f) }
    }

    /// The runtime underneath (its statistics, its pool).
    pub fn runtime(&self) -> &Mangosteen {
        &self.m
    }
}
