//! Rating categories: one rating per player per variant, and per speed class for the variants the
//! configuration rates that way (international by default). The one rule for which rating a game
//! counts for: Ratings rates by it, matchmaking and tournaments read a player's rating by it.

use std::fmt;
use std::str::FromStr;

use draughts_engine::Variant;

use crate::pb;
use crate::vocab::time::{Speed, TimeControl};

/// Which rating a game counts for: a variant, and a speed class for the variants rated per speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Category {
    /// The variant.
    pub variant: Variant,
    /// `None`: the variant's single rating.
    pub speed: Option<Speed>,
}

impl Category {
    /// The category of a game in `variant` with `time_control`: with a speed class only if
    /// `per_speed` says the variant is rated per speed class and the time control is known.
    pub fn of_game(
        variant: Variant,
        time_control: Option<&TimeControl>,
        per_speed: &[Variant],
    ) -> Category {
        let speed = match time_control {
            Some(tc) if per_speed.contains(&variant) => Some(Speed::of(tc)),
            _ => None,
        };
        Category { variant, speed }
    }

    /// The wire form (`SPEED_CLASS_UNSPECIFIED` for a variant's single rating).
    pub fn to_wire(self) -> pb::RatingCategory {
        pb::RatingCategory {
            variant: crate::convert::variant_to_wire(self.variant) as i32,
            speed: self
                .speed
                .map_or(pb::SpeedClass::Unspecified, Speed::to_wire) as i32,
        }
    }
}

/// The stored key: `international`, `international:blitz`.
impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.variant.key())?;
        if let Some(speed) = self.speed {
            write!(f, ":{}", speed.key())?;
        }
        Ok(())
    }
}

/// The text is not a stored category key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a rating category: {0:?}")]
pub struct BadCategory(pub String);

impl FromStr for Category {
    type Err = BadCategory;

    fn from_str(text: &str) -> Result<Category, BadCategory> {
        let bad = || BadCategory(text.to_owned());
        let (variant_key, speed_key) = match text.split_once(':') {
            Some((variant, speed)) => (variant, Some(speed)),
            None => (text, None),
        };
        let variant = Variant::from_key(variant_key).map_err(|_| bad())?;
        let speed = match speed_key {
            None => None,
            Some(key) => Some(
                Speed::ALL
                    .into_iter()
                    .find(|s| s.key() == key)
                    .ok_or_else(bad)?,
            ),
        };
        Ok(Category { variant, speed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fischer(base_s: u64, increment_s: u64) -> TimeControl {
        TimeControl::Fischer {
            base_ms: base_s * 1000,
            increment_ms: increment_s * 1000,
        }
    }

    #[test]
    fn speed_classes() {
        for (tc, speed) in [
            (fischer(60, 0), Speed::Bullet),
            (fischer(120, 1), Speed::Bullet),
            (fischer(120, 2), Speed::Blitz),
            (fischer(180, 0), Speed::Blitz),
            (fischer(300, 3), Speed::Blitz),
            (fischer(600, 5), Speed::Rapid),
            (fischer(900, 10), Speed::Rapid),
            (fischer(1800, 0), Speed::Classical),
            (
                TimeControl::Correspondence { days_per_move: 3 },
                Speed::Correspondence,
            ),
        ] {
            assert_eq!(Speed::of(&tc), speed, "{tc:?}");
        }
    }

    #[test]
    fn categories_round_trip() {
        let per_speed = [Variant::International];
        let blitz = Category::of_game(Variant::International, Some(&fischer(300, 3)), &per_speed);
        assert_eq!(blitz.to_string(), "international:blitz");
        let english = Category::of_game(Variant::English, Some(&fischer(300, 3)), &per_speed);
        assert_eq!(english.to_string(), "english");
        let untimed = Category::of_game(Variant::International, None, &per_speed);
        assert_eq!(untimed.to_string(), "international");
        for category in [blitz, english, untimed] {
            assert_eq!(category.to_string().parse::<Category>(), Ok(category));
        }
        // Every variant, the new ones too (antidraughts, breakthrough, killer, pool, portuguese, frisian, frysk, canadian), is its own
        // category under its stable key.
        for v in Variant::ALL {
            let c = Category::of_game(v, None, &per_speed);
            assert_eq!(c.to_string(), v.key());
            assert_eq!(c.to_string().parse::<Category>(), Ok(c));
        }
        assert!("international:hyper".parse::<Category>().is_err());
        assert!("chess".parse::<Category>().is_err());
    }
}
