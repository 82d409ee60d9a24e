//! The public API, package `draughts.v1`: generated messages, servers and clients, the conversions
//! between wire and engine types, and the ONE table that maps errors to gRPC status codes.
//!
//! ```
//! use draughts_proto::{convert, pb};
//!
//! let rules = pb::RuleSet { variant: pb::Variant::English as i32, options: None };
//! let rule_set = convert::rule_set(Some(&rules)).unwrap();
//! let pos = convert::position(rule_set, "").unwrap();
//! assert_eq!(convert::position_to_wire(&pos).fen, "B:W21,22,23,24,25,26,27,28,29,30,31,32:B1,2,3,4,5,6,7,8,9,10,11,12");
//! ```

pub mod contract;
pub mod convert;
pub mod error;
pub mod ids;
pub mod vocab;

/// Generated code of `proto/draughts/v1`. Its docs are the protos' comments as written for the
/// protos (`<id>` placeholders, bare URLs), not rustdoc: their rustdoc lints are off here.
#[allow(
    clippy::all,
    missing_debug_implementations,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_rust_codeblocks
)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/draughts.v1.rs"));
}

/// The encoded `FileDescriptorSet` of the whole API (for gRPC reflection and dynamic clients).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/draughts_descriptor.bin"));

pub use error::{
    ApiError, ErrorKind, REASON_TRAILER, ServiceError, kind_of_code, reason_of, reason_text,
    status_code,
};
