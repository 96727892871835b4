//! Mangosteen (Lersch et al.; SPEC M1–M9), part 1: the persistence machinery that makes an
//! in-memory state durable with one fence and one persist per batch.
//!
//! What is built here, named as the paper names it (modules are crate-private; the public
//! surface is listed below):
//! * `dedup` — the intra-batch deduplication hash set of Fig. 3 (lines 6–12): aligned
//!   block addresses in a cache-resident open-addressing table with linear probing,
//!   spilling into an overflow buffer past 60% load (§4.3).
//! * `redo_log` — the batched redo log of §4.3: a PM ring buffer of one-line records
//!   (REDO with a block, COMMIT), persistent head and tail, the frontend's `rb_enque` and
//!   `end_tx` (Fig. 3 lines 20–41).
//! * `backend` — Fig. 4: applies committed records to the PM copy and advances the
//!   persistent head; a thread of its own or called inline.
//! * `recovery` — M8: replay the committed records between head and tail onto the PM
//!   copy, then rebuild the DRAM copy from it.
//! * `flat_combining` — Fig. 2's batching of read-write requests from many threads: one
//!   combiner runs every published request as one batch, sharing its fence and persist.
//! * `runtime` — [`Mangosteen`], a durable byte region: reads run on the DRAM copy in
//!   parallel; a batch of writes (explicit capture, `Tx::write`/`Tx::record`, the API the
//!   compiler instrumentation of part 2 will call) is executed under the writer lock, its
//!   dirty blocks deduplicated and logged, and the batch returns only once its COMMIT is
//!   persistent.
//!
//! * `capture` — write capture with no recompilation: the region is write-protected for
//!   a batch, each page's first write faults and is snapshotted, and the blocks that
//!   really changed are logged at commit.
//!
//! * `callback` and `rpc` — the callback API of Listing 1 (M1), in local mode and
//!   over a socket; `kv` is a small application on it (the `mangosteen-kv` server).
//!
//! The callback API's C form is in `bindings/c` (`pmkv_mg_*`, with a C test of the
//! paper's Listing 2 store in local and RPC mode).
//!
//! * `heap` and `split_alloc` — the split heap (M7): the region is mapped at one
//!   address for the pool's life, a persistent allocator keeps all its metadata inside
//!   it, and a global allocator sends a request's allocations there and every other
//!   allocation to the system heap.
//! * `engine` — the `mangosteen` engine behind the library API: the standard library's
//!   `BTreeMap`, unchanged, made durable by all of the above.
//!
//! ## The public surface
//!
//! Only what an application built on the runtime needs, at the crate root:
//!
//! * the engine behind `pmkv::Store`: [`FACTORY`] (and its type, [`MangosteenFactory`]),
//!   with the pool layout name [`LAYOUT`];
//! * the runtime: [`Mangosteen`] (a durable region), its [`Options`] and [`Capture`] mode,
//!   [`Tx`] (a batch in progress), [`Error`] and [`Result`];
//! * the callback API of Listing 1 (M1): [`Application`] and [`Frontend`] (local mode),
//!   and RPC mode: [`serve`] on the server side, [`RpcClient`] on the client side, with
//!   the framing ([`read_frame`], [`write_frame`], [`MAX_FRAME`]) for clients in other
//!   languages;
//! * the split heap (M7): [`SplitAlloc`], the global allocator a program installs, whose
//!   associated functions enter a request's allocation scope ([`SplitAlloc::scope`]) and
//!   register regions ([`Registration`]); [`Heap`], the persistent allocator inside a
//!   region (the C API's `malloc` interposer allocates from it);
//! * [`Durable`], an ordinary Rust value made durable with its code unchanged: `write`
//!   and `read` closures over it (the split heap and page capture underneath);
//! * [`Captured`], a program's own Rust structure made durable with compiler capture: a
//!   module built by `pmkv-mangosteen-build` ([`CapturedModule`]) writes it through its
//!   exported writes ([`Op`]), the program reads it with its own code;
//! * [`KvApp`] and [`KvRequest`], the small application the `mangosteen-kv` server runs.
//!
//! Recovery reports through the core's [`pmkv_core::RecoveryReport`]
//! ([`Mangosteen::recovery`]): the redo log slots replayed are `rolled_forward`, and the
//! log's persistent head and tail are the details `log_head` and `log_tail`.
//! Everything else — the log, the deduplication set, the combiner, page capture — is
//! crate-private: its invariants (who may write the PM copy, when the tail may move) are
//! kept by `Mangosteen`'s methods, not by callers.

/// The ABI between the capture hooks and the code they instrument (`instrumented/`), shared
/// by compiler capture and the deduplication set.
#[path = "../instrumented/abi.rs"]
#[allow(dead_code)]
mod abi;
mod backend;
mod callback;
mod capture;
mod captured;
mod compiler_capture;
mod dedup;
mod durable;
mod engine;
mod error;
mod flat_combining;
mod heap;
mod kv;
mod layout;
mod recovery;
mod redo_log;
mod rpc;
mod runtime;
mod salvage;
mod split_alloc;
mod tx;

/// The persistent heap's writes (`heap.rs`), made by this crate's uninstrumented copy of
/// it (for C applications' `malloc` and the root calls): reported to the compiler-capture
/// hooks, which record them if this thread runs a compiler-captured batch on the region.
#[inline]
fn heap_written(p: *const u8, n: usize) {
    compiler_capture::heap_written(p, n)
}

pub use callback::{Application, Frontend};
pub use captured::{Captured, Op};
pub use compiler_capture::CapturedModule;
pub use durable::Durable;
pub use engine::{MangosteenFactory, MapOptions, FACTORY, LAYOUT};
pub use error::{Error, Result};
pub use heap::Heap;
pub use kv::{KvApp, KvRequest};
pub use rpc::{read_frame, serve, write_frame, RpcClient, MAX_FRAME};
pub use runtime::{Capture, Instrumented, Log, Mangosteen, Options};
pub use split_alloc::{Registration, SplitAlloc};
pub use tx::Tx;
