//! The configured quick-pairing pools: variant x time control x rated/casual, with stable ids.
//!
//! ```
//! use draughts_matchmaking::pools::{pools, TimeControl};
//! let all = pools(&["english".into()], &["3+2".into(), "corr3".into()]).unwrap();
//! let ids: Vec<_> = all.iter().map(|p| p.id.as_str()).collect();
//! assert_eq!(ids, ["english-3+2-rated", "english-3+2-casual", "english-corr3-rated", "english-corr3-casual"]);
//! assert_eq!(all[0].time, TimeControl::Fischer { base_ms: 180_000, increment_ms: 2_000 });
//! ```

use std::str::FromStr;

use draughts_engine::Variant;

/// The time controls of the default pools (minutes + seconds; `corr<days>`).
pub const DEFAULT_TIME_CONTROLS: &str = "1+0,2+1,3+0,3+2,5+0,5+3,10+0,15+10,corr3";

/// A pool's time control is the platform's one type, in its short text form (`3+2`, `corr3`).
pub use draughts_proto::vocab::time::TimeControl;

/// One pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub id: String,
    pub variant: Variant,
    pub time: TimeControl,
    pub rated: bool,
}

/// Every pool of `variants` x `time_controls` x {rated, casual}, in that order. Variant keys as the
/// engine spells them, or `all`.
pub fn pools(variants: &[String], time_controls: &[String]) -> Result<Vec<Pool>, String> {
    let mut vs = Vec::new();
    for v in variants {
        if v == "all" {
            vs.extend(Variant::ALL);
        } else {
            vs.push(Variant::from_str(v).map_err(|e| e.to_string())?);
        }
    }
    let times = time_controls
        .iter()
        .map(|t| TimeControl::parse_short(t.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::new();
    for variant in vs {
        for time in &times {
            for rated in [true, false] {
                let id = format!(
                    "{}-{}-{}",
                    variant.key(),
                    time.short_key(),
                    if rated { "rated" } else { "casual" }
                );
                if out.iter().any(|p: &Pool| p.id == id) {
                    return Err(format!("pool {id} is configured twice"));
                }
                out.push(Pool {
                    id,
                    variant,
                    time: *time,
                    rated,
                });
            }
        }
    }
    if out.is_empty() {
        return Err("no pool configured".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_cover_every_variant() {
        let tcs: Vec<String> = DEFAULT_TIME_CONTROLS.split(',').map(String::from).collect();
        let all = pools(&["all".into()], &tcs).unwrap();
        assert_eq!(all.len(), Variant::ALL.len() * 9 * 2);
        assert!(all.iter().any(|p| p.id == "international-15+10-casual"));
        assert!(all.iter().any(|p| p.id == "turkish-corr3-rated"));
    }

    #[test]
    fn bad_time_controls_are_refused() {
        for bad in [
            "", "3", "0+0", "3+", "+2", "corr0", "corr31", "99999+0", "0+3601", "x+1",
        ] {
            assert!(TimeControl::parse_short(bad).is_err(), "{bad}");
        }
        assert!(pools(&["chess".into()], &["3+2".into()]).is_err());
        assert!(pools(&["english".into()], &["3+2".into(), "3+2".into()]).is_err());
    }
}
