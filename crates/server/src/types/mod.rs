//! The commands of the collection types that have modules of their own: lists, sets and
//! sorted sets. Each module holds its type's handlers and exports their list,
//! `COMMANDS` (each entry made by [`crate::command::write`], [`crate::command::read`] or
//! [`crate::command::blocking`], next to its handler), which [`crate::table`] gathers.
//!
//! A type's records — its tag, meta record and element layout — are below, in
//! [`crate::record`]; the handlers work over the keyspace's [`crate::keyspace::Tx`] and
//! the data commands' helpers ([`crate::data`]). Strings' and hashes' handlers are still
//! the `match` in [`crate::data`]. Design and costs: docs/design/server-types.md.

pub(crate) mod list;
pub(crate) mod set;
pub(crate) mod zset;
