//! Glicko-2 exactly as Mark Glickman defines it in "Example of the Glicko-2 system" (steps 1-8, with the
//! volatility found by the Illinois variant of regula falsi in step 5). A pure leaf module: numbers in,
//! numbers out; no I/O, no clock, no storage.
//!
//! Ratings are kept on the Glicko scale (rating points, start 1500); the Glicko-2 scale
//! (`mu = (r - 1500) / 173.7178`, `phi = RD / 173.7178`) is used only inside the computations.
//!
//! Two ways to cut time into rating periods sit on top of this module (see the crate docs):
//! - one game per period (the default): [`rate`] with one game and `elapsed_periods` = the (fractional)
//!   number of periods since the player's previous game, so the deviation grows with inactivity first;
//! - fixed periods (Glickman's original scheme): [`inflate`] by the whole periods the player sat out,
//!   then [`rate`] with every game of the period and `elapsed_periods = 1`.
//!
//! ```
//! use draughts_ratings::glicko::{self, Game, Glicko, Params};
//!
//! // Glickman's worked example (tau = 0.5).
//! let params = Params { tau: 0.5, ..Params::UNCLAMPED };
//! let player = Glicko { rating: 1500.0, deviation: 200.0, volatility: 0.06 };
//! let games = [
//!     Game { opponent: Glicko { rating: 1400.0, deviation: 30.0, volatility: 0.06 }, score: 1.0 },
//!     Game { opponent: Glicko { rating: 1550.0, deviation: 100.0, volatility: 0.06 }, score: 0.0 },
//!     Game { opponent: Glicko { rating: 1700.0, deviation: 300.0, volatility: 0.06 }, score: 0.0 },
//! ];
//! let after = glicko::rate(player, &games, 1.0, &params);
//! // Glickman publishes r' = 1464.06, RD' = 151.52, sigma' = 0.05999.
//! assert!((after.rating - 1464.06).abs() < 0.01);
//! assert!((after.deviation - 151.52).abs() < 0.005);
//! assert!((after.volatility - 0.05999).abs() < 0.00001);
//! ```
//!
//! (Unrounded the results are 1464.0507, 151.5165 and 0.0599960: Glickman rounds mu' to -0.2069 before
//! converting back, and cuts sigma' to five places; see the tests.)

/// Rating points per Glicko-2 unit (Glickman's 400 / ln 10, rounded as he rounds it).
pub const SCALE: f64 = 173.7178;

/// The rating every scale is centred on.
pub const CENTRE: f64 = 1500.0;

/// Step 5's convergence tolerance, Glickman's epsilon.
pub const EPSILON: f64 = 0.000_001;

/// Upper bound on iterations of step 5 (Illinois converges in a handful; this only guards bad input).
const MAX_ITERATIONS: usize = 200;

/// The system's constants and bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Rating of a new player, rating points (1500).
    pub initial_rating: f64,
    /// Deviation of a new player, rating points (350).
    pub initial_deviation: f64,
    /// Volatility of a new player (0.06).
    pub initial_volatility: f64,
    /// Glickman's tau: how much the volatility may change per period (0.3 to 1.2 are reasonable).
    pub tau: f64,
    /// No deviation goes below this, rating points.
    pub min_deviation: f64,
    /// No deviation goes above this (inactivity never makes a rating less certain than this).
    pub max_deviation: f64,
    /// No volatility goes above this.
    pub max_volatility: f64,
}

impl Params {
    /// Glickman's suggested values with tau 0.75, deviations kept within 45..350 and volatility at
    /// most 0.1 (the bounds an online platform such as lichess uses).
    pub const DEFAULT: Params = Params {
        initial_rating: 1500.0,
        initial_deviation: 350.0,
        initial_volatility: 0.06,
        tau: 0.75,
        min_deviation: 45.0,
        max_deviation: 350.0,
        max_volatility: 0.1,
    };

    /// The defaults with no bounds at all: the plain system of the paper.
    pub const UNCLAMPED: Params = Params {
        min_deviation: 0.0,
        max_deviation: f64::INFINITY,
        max_volatility: f64::INFINITY,
        ..Params::DEFAULT
    };

    /// A new player's rating.
    pub fn initial(&self) -> Glicko {
        Glicko {
            rating: self.initial_rating,
            deviation: self.initial_deviation,
            volatility: self.initial_volatility,
        }
    }

    /// Why these parameters cannot be used, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        let positive = |name: &str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(format!("{name} must be a positive number, got {value}"))
            }
        };
        if !self.initial_rating.is_finite() {
            return Err(format!(
                "initial rating must be a number, got {}",
                self.initial_rating
            ));
        }
        positive("initial deviation", self.initial_deviation)?;
        positive("initial volatility", self.initial_volatility)?;
        positive("tau", self.tau)?;
        positive("minimum deviation", self.min_deviation)?;
        positive("maximum deviation", self.max_deviation)?;
        positive("maximum volatility", self.max_volatility)?;
        if self.min_deviation > self.max_deviation {
            return Err(format!(
                "minimum deviation {} is above the maximum {}",
                self.min_deviation, self.max_deviation
            ));
        }
        if !(self.min_deviation..=self.max_deviation).contains(&self.initial_deviation) {
            return Err(format!(
                "initial deviation {} is outside {}..{}",
                self.initial_deviation, self.min_deviation, self.max_deviation
            ));
        }
        if self.initial_volatility > self.max_volatility {
            return Err(format!(
                "initial volatility {} is above the maximum {}",
                self.initial_volatility, self.max_volatility
            ));
        }
        Ok(())
    }
}

/// A rating on the Glicko scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Glicko {
    /// Rating points.
    pub rating: f64,
    /// Rating deviation, rating points.
    pub deviation: f64,
    /// Volatility (sigma), dimensionless.
    pub volatility: f64,
}

impl Glicko {
    fn mu(&self) -> f64 {
        (self.rating - CENTRE) / SCALE
    }

    fn phi(&self) -> f64 {
        self.deviation / SCALE
    }
}

/// One game of a rating period, from the rated player's side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Game {
    /// The opponent's rating at the start of the period.
    pub opponent: Glicko,
    /// The rated player's score: 1 win, 0.5 draw, 0 loss.
    pub score: f64,
}

/// Glickman's g(phi).
fn g(phi: f64) -> f64 {
    1.0 / (1.0 + 3.0 * phi * phi / (std::f64::consts::PI * std::f64::consts::PI)).sqrt()
}

/// Glickman's E(mu, mu_j, phi_j).
fn e(mu: f64, mu_j: f64, phi_j: f64) -> f64 {
    1.0 / (1.0 + (-g(phi_j) * (mu - mu_j)).exp())
}

fn clamp_deviation(phi: f64, params: &Params) -> f64 {
    (phi * SCALE).clamp(params.min_deviation, params.max_deviation)
}

/// The rating after `periods` rating periods without games: the deviation grows as
/// `sqrt(phi^2 + periods * sigma^2)` (step 6 for a player who did not compete), up to the maximum.
/// Fractional periods are allowed (one game per period measures inactivity in time).
pub fn inflate(rating: Glicko, periods: f64, params: &Params) -> Glicko {
    let periods = if periods.is_finite() {
        periods.max(0.0)
    } else {
        0.0
    };
    let phi = rating.phi();
    let grown = (phi * phi + periods * rating.volatility * rating.volatility).sqrt();
    Glicko {
        deviation: clamp_deviation(grown, params).max(rating.deviation.min(params.max_deviation)),
        ..rating
    }
}

/// How many rating periods without games it takes for the deviation of `rating` to exceed
/// `threshold` rating points; `None` if it already does (0 if it is exactly there).
pub fn periods_until_deviation_exceeds(rating: Glicko, threshold: f64) -> Option<f64> {
    if rating.deviation > threshold {
        return None;
    }
    let phi = rating.phi();
    let limit = threshold / SCALE;
    let sigma2 = rating.volatility * rating.volatility;
    if sigma2 <= 0.0 {
        return Some(f64::INFINITY);
    }
    Some((limit * limit - phi * phi).max(0.0) / sigma2)
}

/// Step 5: the new volatility, by the Illinois algorithm.
fn new_volatility(sigma: f64, phi: f64, v: f64, delta: f64, tau: f64) -> f64 {
    let a = (sigma * sigma).ln();
    let phi2 = phi * phi;
    let f = |x: f64| {
        let ex = x.exp();
        let denominator = phi2 + v + ex;
        ex * (delta * delta - phi2 - v - ex) / (2.0 * denominator * denominator)
            - (x - a) / (tau * tau)
    };
    let mut big_a = a;
    let mut big_b = if delta * delta > phi2 + v {
        (delta * delta - phi2 - v).ln()
    } else {
        let mut k = 1.0;
        while f(a - k * tau) < 0.0 && k < MAX_ITERATIONS as f64 {
            k += 1.0;
        }
        a - k * tau
    };
    let mut f_a = f(big_a);
    let mut f_b = f(big_b);
    let mut iterations = 0;
    while (big_b - big_a).abs() > EPSILON && iterations < MAX_ITERATIONS {
        let big_c = big_a + (big_a - big_b) * f_a / (f_b - f_a);
        let f_c = f(big_c);
        if f_c * f_b <= 0.0 {
            big_a = big_b;
            f_a = f_b;
        } else {
            f_a /= 2.0;
        }
        big_b = big_c;
        f_b = f_c;
        iterations += 1;
    }
    let sigma_new = (big_a / 2.0).exp();
    if sigma_new.is_finite() && sigma_new > 0.0 {
        sigma_new
    } else {
        sigma
    }
}

/// Steps 2-8: the rating after one rating period in which `player` played `games`.
///
/// `elapsed_periods` scales step 6 (`phi* = sqrt(phi^2 + elapsed * sigma'^2)`): 1 for Glickman's fixed
/// periods; the fractional number of periods since the previous game when each game is its own period.
/// Without games only the deviation grows ([`inflate`]). Results are kept within the bounds of `params`;
/// non-finite input leaves the rating unchanged.
pub fn rate(player: Glicko, games: &[Game], elapsed_periods: f64, params: &Params) -> Glicko {
    if games.is_empty() {
        return inflate(player, elapsed_periods, params);
    }
    let elapsed = if elapsed_periods.is_finite() {
        elapsed_periods.max(0.0)
    } else {
        1.0
    };
    let mu = player.mu();
    let phi = player.phi();
    // Step 3 and the sum of step 4.
    let mut inverse_v = 0.0;
    let mut improvement = 0.0;
    for game in games {
        let mu_j = game.opponent.mu();
        let phi_j = game.opponent.phi();
        let g_j = g(phi_j);
        let expected = e(mu, mu_j, phi_j);
        inverse_v += g_j * g_j * expected * (1.0 - expected);
        improvement += g_j * (game.score - expected);
    }
    let v = 1.0 / inverse_v;
    let delta = v * improvement;
    // Step 5.
    let sigma_new =
        new_volatility(player.volatility, phi, v, delta, params.tau).min(params.max_volatility);
    // Steps 6 and 7.
    let phi_star = (phi * phi + elapsed * sigma_new * sigma_new).sqrt();
    let phi_new = 1.0 / (1.0 / (phi_star * phi_star) + 1.0 / v).sqrt();
    let mu_new = mu + phi_new * phi_new * improvement;
    // Step 8.
    let rated = Glicko {
        rating: SCALE * mu_new + CENTRE,
        deviation: clamp_deviation(phi_new, params),
        volatility: sigma_new,
    };
    if rated.rating.is_finite() && rated.deviation.is_finite() && rated.volatility.is_finite() {
        rated
    } else {
        player
    }
}

/// The expected score of `a` against `b` (0 to 1), with both deviations combined:
/// `1 / (1 + exp(-g(sqrt(phi_a^2 + phi_b^2)) (mu_a - mu_b)))`.
pub fn expected_score(a: Glicko, b: Glicko) -> f64 {
    let phi = (a.phi() * a.phi() + b.phi() * b.phi()).sqrt();
    e(a.mu(), b.mu(), phi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glicko(rating: f64, deviation: f64) -> Glicko {
        Glicko {
            rating,
            deviation,
            volatility: 0.06,
        }
    }

    /// Glickman, "Example of the Glicko-2 system", section "Example calculation".
    #[test]
    fn glickman_worked_example() {
        let params = Params {
            tau: 0.5,
            ..Params::UNCLAMPED
        };
        let games = [
            Game {
                opponent: glicko(1400.0, 30.0),
                score: 1.0,
            },
            Game {
                opponent: glicko(1550.0, 100.0),
                score: 0.0,
            },
            Game {
                opponent: glicko(1700.0, 300.0),
                score: 0.0,
            },
        ];
        let player = glicko(1500.0, 200.0);
        // The intermediate quantities Glickman prints, v = 1.7785 and delta = -0.4834, come from g and E
        // rounded to four places; unrounded they are 1.77898 and -0.48393.
        let (mu, phi) = (player.mu(), player.phi());
        let mut inverse_v = 0.0;
        let mut improvement = 0.0;
        for game in &games {
            let (mu_j, phi_j) = (game.opponent.mu(), game.opponent.phi());
            let expected = e(mu, mu_j, phi_j);
            inverse_v += g(phi_j).powi(2) * expected * (1.0 - expected);
            improvement += g(phi_j) * (game.score - expected);
        }
        let v = 1.0 / inverse_v;
        assert!((v - 1.7785).abs() < 0.001, "{v}");
        assert!(
            (v * improvement - -0.4834).abs() < 0.001,
            "{}",
            v * improvement
        );
        let sigma = new_volatility(0.06, phi, v, v * improvement, 0.5);
        // Glickman prints sigma' = 0.05999 (0.0599960 cut to five places).
        assert!((sigma - 0.05999).abs() < 0.00001, "{sigma}");

        let after = rate(player, &games, 1.0, &params);
        // mu' = -0.2069 and phi' = 0.8722 on the Glicko-2 scale.
        assert_eq!(format!("{:.4}", after.mu()), "-0.2069");
        assert_eq!(format!("{:.4}", after.phi()), "0.8722");
        // r' = 1464.06 as published (from mu' rounded to -0.2069), RD' = 151.52, sigma' = 0.05999.
        assert_eq!(format!("{:.2}", SCALE * -0.2069 + CENTRE), "1464.06");
        assert!((after.rating - 1464.06).abs() < 0.01, "{}", after.rating);
        assert_eq!(format!("{:.2}", after.deviation), "151.52");
        assert!((after.volatility - 0.05999).abs() < 0.00001);
    }

    #[test]
    fn no_games_only_grows_the_deviation() {
        let params = Params::DEFAULT;
        let player = glicko(1800.0, 60.0);
        let after = rate(player, &[], 1.0, &params);
        assert_eq!(after.rating, 1800.0);
        assert_eq!(after.volatility, 0.06);
        let expected = ((60.0f64 / SCALE).powi(2) + 0.06f64.powi(2)).sqrt() * SCALE;
        assert!((after.deviation - expected).abs() < 1e-9);
        // Capped at the maximum after a long absence.
        assert_eq!(inflate(player, 1e9, &params).deviation, 350.0);
        // Never shrinks, even for a negative or NaN period count.
        assert!((inflate(player, -5.0, &params).deviation - 60.0).abs() < 1e-9);
        assert!((inflate(player, f64::NAN, &params).deviation - 60.0).abs() < 1e-9);
    }

    #[test]
    fn periods_until_provisional() {
        let player = glicko(1500.0, 100.0);
        let periods = periods_until_deviation_exceeds(player, 110.0).unwrap();
        let at = inflate(player, periods, &Params::UNCLAMPED);
        assert!((at.deviation - 110.0).abs() < 1e-9);
        assert_eq!(
            periods_until_deviation_exceeds(glicko(1500.0, 120.0), 110.0),
            None
        );
    }

    #[test]
    fn equal_players_exchange_equal_amounts() {
        let params = Params::DEFAULT;
        let a = glicko(1500.0, 80.0);
        let b = glicko(1500.0, 80.0);
        let a_after = rate(
            a,
            &[Game {
                opponent: b,
                score: 1.0,
            }],
            1.0,
            &params,
        );
        let b_after = rate(
            b,
            &[Game {
                opponent: a,
                score: 0.0,
            }],
            1.0,
            &params,
        );
        assert!(a_after.rating > 1500.0);
        assert!(((a_after.rating - 1500.0) + (b_after.rating - 1500.0)).abs() < 1e-9);
        assert!((a_after.deviation - b_after.deviation).abs() < 1e-9);
        // A draw between equals changes no rating.
        let drawn = rate(
            a,
            &[Game {
                opponent: b,
                score: 0.5,
            }],
            1.0,
            &params,
        );
        assert!((drawn.rating - 1500.0).abs() < 1e-9);
        assert!((expected_score(a, b) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn expected_scores_are_complementary_and_ordered() {
        let strong = glicko(1900.0, 50.0);
        let weak = glicko(1500.0, 50.0);
        let e_strong = expected_score(strong, weak);
        assert!(e_strong > 0.5 && e_strong < 1.0);
        assert!((e_strong + expected_score(weak, strong) - 1.0).abs() < 1e-12);
        // More uncertainty pulls the expectation towards 1/2.
        assert!(expected_score(glicko(1900.0, 300.0), weak) < e_strong);
    }

    #[test]
    fn params_are_checked() {
        assert!(Params::DEFAULT.check().is_ok());
        for bad in [
            Params {
                tau: 0.0,
                ..Params::DEFAULT
            },
            Params {
                min_deviation: 400.0,
                ..Params::DEFAULT
            },
            Params {
                initial_deviation: 500.0,
                ..Params::DEFAULT
            },
            Params {
                initial_rating: f64::NAN,
                ..Params::DEFAULT
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        fn any_glicko() -> impl Strategy<Value = Glicko> {
            (500.0f64..3000.0, 45.0f64..350.0, 0.03f64..0.1).prop_map(
                |(rating, deviation, volatility)| Glicko {
                    rating,
                    deviation,
                    volatility,
                },
            )
        }

        proptest! {
            /// A win never lowers a rating, a loss never raises it; results stay within the bounds.
            #[test]
            fn updates_move_the_right_way_within_bounds(
                player in any_glicko(),
                opponent in any_glicko(),
                elapsed in 0.0f64..50.0,
            ) {
                let params = Params::DEFAULT;
                for (score, sign) in [(1.0, 1.0), (0.0, -1.0)] {
                    let after = rate(player, &[Game { opponent, score }], elapsed, &params);
                    prop_assert!((after.rating - player.rating) * sign >= 0.0);
                    prop_assert!(after.rating.is_finite());
                    prop_assert!((params.min_deviation..=params.max_deviation).contains(&after.deviation));
                    prop_assert!(after.volatility > 0.0 && after.volatility <= params.max_volatility);
                    // One game moves a rating by less than the 4 * RD^2 / SCALE bound of a
                    // certain loss or win (|s - E| < 1, g <= 1).
                    let phi_star2 = (player.deviation / SCALE).powi(2) + elapsed * after.volatility.powi(2);
                    prop_assert!((after.rating - player.rating).abs() <= SCALE * phi_star2 + 1e-9);
                }
            }

            /// The winner gains what the loser loses when both are equally certain.
            #[test]
            fn symmetric_when_deviations_are_equal(
                a in 1000.0f64..2500.0,
                b in 1000.0f64..2500.0,
                deviation in 45.0f64..350.0,
            ) {
                let params = Params::UNCLAMPED;
                let pa = Glicko { rating: a, deviation, volatility: 0.06 };
                let pb = Glicko { rating: b, deviation, volatility: 0.06 };
                let a_after = rate(pa, &[Game { opponent: pb, score: 1.0 }], 1.0, &params);
                let b_after = rate(pb, &[Game { opponent: pa, score: 0.0 }], 1.0, &params);
                // The volatilities can differ (each player's surprise differs), so the two changes
                // agree closely rather than exactly.
                let gained = a_after.rating - a;
                let lost = b - b_after.rating;
                prop_assert!((gained - lost).abs() <= 0.02 * gained.abs().max(lost.abs()) + 1e-9,
                    "gained {gained}, lost {lost}");
                prop_assert!((expected_score(pa, pb) + expected_score(pb, pa) - 1.0).abs() < 1e-12);
            }
        }
    }
}
