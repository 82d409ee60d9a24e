//! `draughts-load`: a load generator for any unary RPC of the `draughts.v1` API, on loopback only.
//!
//! The method is looked up by name in [`draughts_proto::FILE_DESCRIPTOR_SET`]; the request, given as proto3
//! JSON, is encoded once ([`PreparedCall`]); the same bytes are then sent again and again through tonic with
//! a codec that neither encodes nor decodes ([`codec::RawCodec`]), so the cost per call is the transport
//! and the server. Latencies go into an HdrHistogram; a run stops at a request count or a duration,
//! whichever comes first ([`LoadSettings`]).
//!
//! ```
//! use draughts_loadgen::PreparedCall;
//!
//! let call = PreparedCall::from_json(
//!     "draughts.v1.Rules/ValidateMove",
//!     r#"{"rules":{"variant":"VARIANT_ENGLISH"},"move":{"text":"11-15"}}"#,
//! )
//! .unwrap();
//! assert_eq!(call.path.as_str(), "/draughts.v1.Rules/ValidateMove");
//! assert!(!call.request.is_empty());
//!
//! assert!(PreparedCall::from_json("draughts.v1.Rules/Nope", "{}").is_err());
//! assert_eq!(draughts_loadgen::parse_duration("1.5s").unwrap().as_millis(), 1500);
//! ```

pub mod call;
pub mod codec;
pub mod cpu;
pub mod games;
pub mod load;
pub mod report;
pub mod target;

use std::time::Duration;

pub use call::{CallError, PreparedCall};
pub use load::{LoadError, LoadSettings, run_load};
pub use report::{Comparison, Output, Report};
pub use target::{Target, TargetError};

/// Parses `30s`, `500ms`, `2m`, `1.5s`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 30s, 500ms or 2m"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (use ms, s, m or h)"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let check = |text: &str, millis: Option<u128>| {
            assert_eq!(
                parse_duration(text).ok().map(|d| d.as_millis()),
                millis,
                "{text}"
            )
        };
        check("30s", Some(30_000));
        check("30", Some(30_000));
        check("500ms", Some(500));
        check("2m", Some(120_000));
        check("0.25s", Some(250));
        check("1h", Some(3_600_000));
        check("0", Some(0));
        check("", None);
        check("s", None);
        check("3 days", None);
        check("-1s", None);
    }
}
