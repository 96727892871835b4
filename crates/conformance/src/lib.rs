//! # pmkv-conformance — what every engine must do
//!
//! One suite, generic over an [`EngineFactory`], run through the public [`pmkv::Store`]
//! so that it checks what users get: every API call; scans with every bound kind, limit
//! and direction; cursors stepped from both ends and written to while they run;
//! callbacks that call back into the store; empty and 0x00 keys, the largest keys and
//! values and one byte more; batches; reopen; read-only opens; a second open refused;
//! foreign and damaged files refused without being changed; concurrent readers and
//! writers with checked results; histories of threads sharing keys checked for
//! linearizability; a panic inside a write leaving the pool unclean so that the next
//! open recovers; and, for persistent engines, every write path (put, delete, batch)
//! under the crash simulator (SPEC P6) at every flush and fence point (`adr`) and at
//! every store point (`eadr`, for engines that open an `eadr` pool), recovering to
//! the state before or after the operation (a prefix of a non-atomic batch) with
//! `check` clean (no leak); recovery crashed at each of its own flush and fence points,
//! then run again, giving what an uninterrupted recovery gives (SPEC R3); and randomly
//! damaged copies of a pool, which must read back exactly or fail with an error, never
//! return other data, and never be changed by a read-only open.
//!
//! An engine crate (or this crate's tests) runs it with one line:
//!
//! ```ignore
//! pmkv_conformance::suite!(pmkv_hart::FACTORY);
//! ```
//!
//! which expands to one `#[test]` per case, so failures name the case. Cases that need
//! persistence check the opposite for an engine that declares none (nothing survives).
//! `suite_wal!` runs the cases that simulate no crash again with every pool in mode
//! `wal`.

#![forbid(unsafe_code)]

pub mod basic;
pub mod batch;
pub mod concurrent;
pub mod counted;
pub mod crash;
pub mod damage;
pub mod files;
pub mod linearizability;
pub mod model;
pub mod scan;
pub mod util;

pub use pmkv_core::EngineFactory;

/// The cases that simulate no crash, for [`suite!`] (with the rest) and [`suite_wal!`]:
/// the one list of them, handed to macro `$m` as `@cases $factory; <cases>, <extra>`.
#[doc(hidden)]
#[macro_export]
macro_rules! __plain_cases {
    ($m:path; $factory:expr; $($extra:tt)*) => {
        $m!(@cases $factory;
            basic::crud_and_len,
            basic::edge_keys_and_values,
            basic::size_limits_change_nothing,
            basic::first_last,
            basic::sync_and_close,
            scan::every_bound_kind_limit_and_direction,
            scan::range_edge_cases,
            scan::cursor_from_both_ends,
            scan::cursor_holds_no_lock,
            scan::callbacks_may_reenter,
            batch::batch_applies_in_order,
            batch::batch_checks_sizes_first,
            files::reopen_keeps_everything,
            files::read_only_open_changes_nothing,
            files::second_open_is_refused,
            files::panic_in_write_leaves_pool_unclean,
            concurrent::readers_and_writers,
            concurrent::histories_are_linearizable,
            model::random_operations_match_a_model,
            $($extra)*
        );
    };
}

/// Expand to one `#[test]` per conformance case for `$factory` (a `static` implementing
/// `EngineFactory`). Use inside a module named after the engine.
#[macro_export]
macro_rules! suite {
    ($factory:expr) => {
        $crate::__plain_cases!($crate::suite; $factory;
            basic::unknown_params_refused,
            files::foreign_and_damaged_files_are_refused,
            damage::damaged_copies_read_right_or_fail,
            crash::put_delete_every_crash_point,
            crash::batch_every_crash_point,
            crash::atomic_batch_every_crash_point,
            crash::pipelined_server_traffic_every_crash_point,
            crash::recovery_survives_its_own_crash,
            crash::structural_every_crash_point,
            crash::growth_every_crash_point,
            crash::eadr_put_delete_every_store_point,
            crash::eadr_batch_every_store_point,
            crash::eadr_atomic_batch_every_store_point,
            crash::eadr_pipelined_server_traffic_every_store_point,
            crash::eadr_structural_every_store_point,
            crash::eadr_growth_every_store_point,
            crash::eadr_recovery_survives_its_own_crash,
            counted::lines_written_are_the_lines_dirtied
        );
    };
    (@cases $factory:expr; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::$module::$case(&$factory);
            }
        )*
    };
}

/// Expand to one `#[test]` per conformance case that simulates no crash, each run with
/// every pool in mode `wal` ([`util::in_wal`]): the API, scans, batches, files,
/// concurrency, linearizability and the model, through the redo log. The crash cases
/// simulate `adr`/`eadr` caches; `wal` has its own power-loss simulation (the substrate's
/// and the API's `power_loss` tests).
#[macro_export]
macro_rules! suite_wal {
    ($factory:expr) => {
        $crate::__plain_cases!($crate::suite_wal; $factory;);
    };
    (@cases $factory:expr; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::util::in_wal(&$factory, || $crate::$module::$case(&$factory));
            }
        )*
    };
}
