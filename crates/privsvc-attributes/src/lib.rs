//! Typed, canonical record attributes for privsvc (docs/PROTOCOL.md §2).
//!
//! * Names match `^[a-z][a-z0-9_]{0,31}$` ([`name_problem`] explains any violation). `project`
//!   and `tag` are set by the library and names starting `privsvc` belong to system entities
//!   ([`reserved_problem`], [`user_name_problem`]).
//! * Values are `str` (UTF-8, at most [`MAX_STR_BYTES`] bytes, no control characters), `i32`
//!   (a JSON number on the wire), `u64` and `u256` (decimal strings on the wire, no sign, no
//!   leading zeros, exact range).
//! * A record holds at most [`MAX_ATTRIBUTES`] (30) attributes, `project` and `tag` included.
//! * The canonical form, covered by envelope signatures, is the RFC 8785 JSON of the wire
//!   object `{name: {"type", "value"}}` ([`Attributes::canonical_json`]).
//! * On the ledger each type maps onto the Arkiv native type of the same name (typeIds 8, 2,
//!   3, 4) so range queries keep working ([`Attributes::arkiv_attributes`]).
//!
//! Every error names the attribute and the reason, e.g.
//! `attribute "Foo": names must be lowercase`.
#![forbid(unsafe_code)]

mod app_name;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzz_entry;
pub mod json;
mod map;
mod name;
mod value;

pub use alloy_primitives::U256;
pub use app_name::{AppName, InvalidAppName, MAX_APP_NAME_BYTES, MIN_APP_NAME_BYTES};
pub use error::AttributeError;
pub use map::{ArkivAttribute, Attributes, MAX_ATTRIBUTES};
pub use name::{
    assert_node_safe_names, name_problem, reserved_problem, user_name_problem, MAX_NAME_BYTES,
    RESERVED_NAMES, SYSTEM_PREFIX,
};
pub use value::{AttrType, AttrValue, MAX_STR_BYTES};
