//! Mangosteen (Lersch et al.; SPEC M1–M9), part 1: the persistence machinery that makes an
//! in-memory state durable with one fence and one persist per batch.
//!
//! What is built here, named as the paper names it:
//! * [`dedup`] — the intra-batch deduplication hash set of Fig. 3 (lines 6–12): aligned
//!   block addresses in a cache-resident open-addressing table with linear probing,
//!   spilling into an overflow buffer past 60% load (§4.3).
//! * [`redo_log`] — the batched redo log of §4.3: a PM ring buffer of one-line records
//!   (REDO with a block, COMMIT), persistent head and tail, the frontend's `rb_enque` and
//!   `end_tx` (Fig. 3 lines 20–41).
//! * [`backend`] — Fig. 4: applies committed records to the PM copy and advances the
//!   persistent head; a thread of its own or called inline.
//! * [`recovery`] — M8: replay the committed records between head and tail onto the PM
//!   copy, then rebuild the DRAM copy from it.
//! * [`flat_combining`] — Fig. 2's batching of read-write requests from many threads: one
//!   combiner runs every published request as one batch, sharing its fence and persist.
//! * [`runtime`] — [`Mangosteen`], a durable byte region: reads run on the DRAM copy in
//!   parallel; a batch of writes (explicit capture, `Tx::write`/`Tx::record`, the API the
//!   compiler instrumentation of part 2 will call) is executed under the writer lock, its
//!   dirty blocks deduplicated and logged, and the batch returns only once its COMMIT is
//!   persistent.
//!
//! * [`capture`] — write capture with no recompilation: the region is write-protected for
//!   a batch, each page's first write faults and is snapshotted, and the blocks that
//!   really changed are logged at commit.
//!
//! * [`callback`] and [`rpc`] — the callback API of Listing 1 (M1), in local mode and
//!   over a socket; [`kv`] is a small application on it (the `mangosteen-kv` server).
//!
//! The callback API's C form is in `bindings/c` (`pmkv_mg_*`, with a C test of the
//! paper's Listing 2 store in local and RPC mode).
//!
//! * [`heap`] and [`split_alloc`] — the split heap (M7): the region is mapped at one
//!   address for the pool's life, a persistent allocator keeps all its metadata inside
//!   it, and a global allocator sends a request's allocations there and every other
//!   allocation to the system heap.
//! * [`engine`] — the `mangosteen` engine behind the library API: the standard library's
//!   `BTreeMap`, unchanged, made durable by all of the above.

pub mod backend;
pub mod callback;
pub mod capture;
pub mod dedup;
pub mod engine;
pub mod error;
pub mod flat_combining;
pub mod heap;
pub mod kv;
pub mod layout;
pub mod recovery;
pub mod redo_log;
pub mod rpc;
pub mod runtime;
pub mod split_alloc;

pub use error::{MangosteenError, Result};
pub use runtime::{Capture, Mangosteen, MangosteenOptions, Tx};
