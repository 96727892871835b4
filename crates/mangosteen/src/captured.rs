//! [`Captured`]: a program's own Rust structure made durable with compiler capture. Its
//! code is a module compiled by pmkv-mangosteen-build with the engine's instrumentation
//! ([`CapturedModule`]); writes run the module's exported writes inside a batch, reads run
//! the program's own code directly on the region (docs/design/mangosteen.md, "Compiler
//! capture of a program's own structure").
//!
//! Why the program's code may read the structure the module wrote: both compile the same
//! source for the same type with the same compiler, so they agree on its layout (the
//! loader checks the type's name, size and alignment, `abi::type_tag`); a read changes
//! nothing, so its stores need no capture, and what it allocates is the program's own.

use crate::abi::{self, Msg, WriteFn, WRITE_FULL, WRITE_OK, WRITE_PANICKED};
use crate::compiler_capture::CapturedModule;
use crate::durable::{full, read_root};
use crate::error::{Error, Result};
use crate::heap::Heap;
use crate::runtime::{Capture, Mangosteen, Options, SizeCheck};
use pmkv_substrate::Pool;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::Arc;

/// What an [`Op`] takes and returns, for its `PhantomData`.
type OpTypes<T, A, R> = (fn(&mut T) -> R, fn() -> A);

/// A write of a [`Captured<T>`]'s module taking `A` and returning `R`: found by name with
/// [`Captured::op`], its argument and result types checked against the module's.
pub struct Op<T, A, R> {
    f: WriteFn,
    module: &'static CapturedModule,
    // Covariant in `A`: an `Op` of `(&'static str, u32)` serves `(&'a str, u32)` too (the
    // module copies what it keeps; its `T: 'static` cannot hold the reference).
    _t: PhantomData<OpTypes<T, A, R>>,
}

impl<T, A, R> Clone for Op<T, A, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, A, R> Copy for Op<T, A, R> {}

/// A `T` kept durable in a Mangosteen pool with compiler capture: its writes are the
/// module's (`capture_write!`), run with [`Captured::write`]; [`Captured::read`] runs
/// the program's own code on it, in parallel with other reads.
///
/// Refused at open ([`Captured::open`]): a module whose structure is another type than
/// `T`; a pool holding another type. Refused at a write: an `Op` of another module.
/// A write whose allocations find the region full returns [`Error::Full`] and is rolled
/// back; one whose code panics is rolled back and the panic raised again here.
pub struct Captured<T> {
    m: Mangosteen,
    module: &'static CapturedModule,
    /// The root block's region offset.
    root: usize,
    _t: PhantomData<T>,
}

impl<T: Send + Sync + 'static> Captured<T> {
    /// Open the `T` in `pool` made by `module`'s code, making the region (with `opts`'
    /// geometry) and a `T::default()` in it if the pool has none; an existing one is
    /// recovered first. `opts.capture` becomes `Capture::Compiler` (`Pages` is refused:
    /// use [`crate::Durable`] for that) and `opts.fixed_address` is set (the value holds
    /// pointers). `opts.verify_capture` checks every write against a shadow copy.
    pub fn open(pool: Arc<Pool>, mut opts: Options, module: &'static CapturedModule) -> Result<Captured<T>> {
        let name = std::any::type_name::<T>();
        let want = abi::type_tag::<T>(abi::FNV_START);
        let create = match (module.root_tag, module.create) {
            (Some(tag), Some(create)) if tag == want => create,
            (Some(_), Some(_)) => {
                return Err(Error::InvalidOption(format!(
                    "the captured module's structure (capture_root!) is another type than {name} (or of another \
                     size or alignment): open it with the type its module declares"
                )))
            }
            _ => {
                return Err(Error::InvalidOption(
                    "the captured module declares no structure: add capture_root!(YourType); to it".into(),
                ))
            }
        };
        match opts.capture {
            Capture::Explicit | Capture::Compiler => opts.capture = Capture::Compiler,
            Capture::Pages => {
                return Err(Error::InvalidOption(
                    "Captured writes with compiler capture; page capture of a structure is Durable's".into(),
                ))
            }
        }
        opts.fixed_address = true;
        let m = Mangosteen::open_inner(pool, opts, SizeCheck::Strict, Some(module))?;
        let made = m.batch(|tx| {
            let r = tx.region();
            // SAFETY: the region, ours for the batch; its heap header is only read here.
            let heap = unsafe { Heap::new(r.as_mut_ptr(), r.len()) };
            match if heap.is_formatted() { heap.root() as usize } else { 0 } {
                0 => {}
                off if off + 8 <= r.len() => {
                    // SAFETY: the root block (`Root<T>` of some `T`, its tag first), inside
                    // the region (checked just above); the heap's payloads are 16-aligned.
                    let have = unsafe { (r.as_ptr().add(off) as *const u64).read() };
                    return if have == want { Ok(off) } else { Err(have) };
                }
                _ => return Err(0),
            }
            // SAFETY: the region, ours for the batch, 16-aligned; the module's creation
            // writes only inside it, its stores captured.
            let off = unsafe { create(r.as_mut_ptr(), r.len()) } as usize;
            if off == 0 {
                tx.abort();
            }
            Ok(off)
        });
        let root = match made {
            Ok(Ok(off)) => off,
            Ok(Err(_)) => {
                return Err(Error::InvalidOption(format!(
                    "the pool holds a structure of another type than {name} (or of another size or alignment): \
                     open it with the type it was made with"
                )))
            }
            Err(Error::Aborted) => return Err(Error::Full(format!("no room for a new {name} in the region"))),
            Err(e) => return Err(e),
        };
        Ok(Captured { m, module, root, _t: PhantomData })
    }

    /// The module's write `name` (`capture_write!`), taking `A` and returning `R`:
    /// refused if the module has none of that name, or its types differ.
    pub fn op<A: Copy + Send, R: Copy + Send>(&self, name: &str) -> Result<Op<T, A, R>> {
        let (f, sig) = self.module.write_fn(name).map_err(Error::InvalidOption)?;
        if sig != abi::write_tag::<T, A, R>() {
            return Err(Error::InvalidOption(format!(
                "the captured module's write {name:?} does not take {} and return {} on a {}",
                std::any::type_name::<A>(),
                std::any::type_name::<R>(),
                std::any::type_name::<T>()
            )));
        }
        Ok(Op { f, module: self.module, _t: PhantomData })
    }

    /// Run the write `op` with `args` as a durable write; its result once the write is
    /// durable. Concurrent writes are flat-combined into one batch. Nothing of a write is
    /// committed unless all of it is ([`Error::Full`], a panic: see [`Captured`]).
    pub fn write<A: Copy + Send + Sync, R: Copy + Send>(&self, op: &Op<T, A, R>, args: A) -> Result<R> {
        if !std::ptr::eq(op.module, self.module) {
            return Err(Error::InvalidOption(
                "an Op of another captured module: its writes would not be captured here".into(),
            ));
        }
        let (root, f) = (self.root as u64, op.f);
        loop {
            let mut status = WRITE_OK;
            let mut msg = [0u8; 512];
            let mut msg_len = 0;
            let ran = self.m.batch(|tx| {
                let r = tx.region();
                let mut out = MaybeUninit::<R>::uninit();
                let mut m = Msg { ptr: msg.as_mut_ptr(), cap: msg.len(), len: 0 };
                // SAFETY: the region is ours for the batch and holds the module's `Root<T>`
                // at `root` (checked at open); `args` is an `A` (the `Op`'s types checked
                // against the module's), `Copy`, so the module's copy owns nothing of ours;
                // `out` has room for an `R`, `m` names a live buffer.
                status = unsafe {
                    f(r.as_mut_ptr(), r.len(), root, (&args as *const A).cast(), out.as_mut_ptr().cast(), &mut m)
                };
                msg_len = m.len;
                if status == WRITE_OK {
                    // SAFETY: the module wrote the result (`WRITE_OK`).
                    Some(unsafe { out.assume_init() })
                } else {
                    tx.abort();
                    None
                }
            });
            return match ran {
                Ok(Some(v)) => Ok(v),
                // Another request of the batch aborted: nothing of this one was applied.
                Err(Error::RolledBack) => continue,
                Ok(None) | Err(Error::Aborted) if status == WRITE_PANICKED => {
                    panic!("{} (the write was rolled back)", String::from_utf8_lossy(&msg[..msg_len]))
                }
                Ok(None) | Err(Error::Aborted) if status == WRITE_FULL => Err(full::<T>()),
                Ok(None) => Err(Error::Aborted),
                Err(e) => Err(e),
            };
        }
    }

    /// Run `f` on the value, in parallel with other reads and never beside a batch of
    /// writes; returns its result (anything: the program's code allocates its own).
    pub fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        // SAFETY: the root block is a `Root<T>` (tag checked at open) in the region.
        unsafe { read_root(&self.m, self.root, f) }
    }

    /// The runtime underneath (its statistics, its pool).
    pub fn runtime(&self) -> &Mangosteen {
        &self.m
    }
}
