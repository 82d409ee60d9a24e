//! Match statistics: score and an Elo difference with a 95% error bar.

/// Wins, draws and losses of one player.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub wins: u32,
    pub draws: u32,
    pub losses: u32,
}

/// An Elo difference estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EloEstimate {
    /// The score fraction (0 to 1).
    pub score: f64,
    /// Elo difference; infinite when one side scored everything.
    pub elo: f64,
    /// Half-width of the 95% interval, in Elo (infinite when undefined).
    pub error: f64,
    /// The 95% interval itself, in Elo. Always finite: the score bounds are kept half a game inside
    /// (0, 1), so a clean sweep of n games still says "at least so much".
    pub lower: f64,
    pub upper: f64,
}

fn elo_of(p: f64) -> f64 {
    if p <= 0.0 {
        f64::NEG_INFINITY
    } else if p >= 1.0 {
        f64::INFINITY
    } else {
        -400.0 * (1.0 / p - 1.0).log10()
    }
}

impl Tally {
    pub fn games(&self) -> u32 {
        self.wins + self.draws + self.losses
    }

    /// The Elo difference from the score, with the error from the per-game score variance (normal
    /// approximation, 1.96 standard errors).
    pub fn elo(&self) -> EloEstimate {
        let n = f64::from(self.games().max(1));
        let (w, d, l) = (
            f64::from(self.wins) / n,
            f64::from(self.draws) / n,
            f64::from(self.losses) / n,
        );
        let p = w + d / 2.0;
        let var = w * (1.0 - p).powi(2) + d * (0.5 - p).powi(2) + l * p.powi(2);
        let se = (var / n).sqrt();
        // Bounds kept inside (0, 1) by half a game, so a clean sweep still has a finite error bar.
        let edge = 0.5 / n;
        let lo = elo_of((p - 1.96 * se).clamp(edge, 1.0 - edge));
        let hi = elo_of((p + 1.96 * se).clamp(edge, 1.0 - edge));
        let elo = elo_of(p);
        let error = if elo.is_finite() && lo.is_finite() && hi.is_finite() {
            (hi - lo) / 2.0
        } else {
            f64::INFINITY
        };
        EloEstimate {
            score: p,
            elo,
            error,
            lower: lo,
            upper: hi,
        }
    }
}

/// A sequential probability ratio test between two Elo hypotheses (`elo0` against `elo1`, logistic Elo),
/// with the usual error rates: `alpha` (accepting H1 when H0 holds) and `beta` (the reverse).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sprt {
    pub elo0: f64,
    pub elo1: f64,
    pub alpha: f64,
    pub beta: f64,
}

/// Where an SPRT stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SprtState {
    /// Neither bound reached: play on.
    Continue,
    /// The log-likelihood ratio fell to the lower bound: H0 (`elo0`) accepted.
    AcceptH0,
    /// It reached the upper bound: H1 (`elo1`) accepted.
    AcceptH1,
}

impl Sprt {
    /// The lower and upper bounds of the log-likelihood ratio: `ln(beta / (1 - alpha))`,
    /// `ln((1 - beta) / alpha)`.
    pub fn bounds(&self) -> (f64, f64) {
        (
            (self.beta / (1.0 - self.alpha)).ln(),
            ((1.0 - self.beta) / self.alpha).ln(),
        )
    }

    /// The log-likelihood ratio of H1 against H0 after these games: the normal approximation of the
    /// generalised SPRT on the per-game scores (W/D/L), `n (s1 - s0) (2 m - s0 - s1) / (2 v)` where `m` and
    /// `v` are the mean and variance of a game's score and `s0`, `s1` the hypotheses' expected scores. 0
    /// while the variance is 0 (no games, or all results equal).
    pub fn llr(&self, t: &Tally) -> f64 {
        let n = f64::from(t.games());
        if n == 0.0 {
            return 0.0;
        }
        let (w, d, l) = (
            f64::from(t.wins) / n,
            f64::from(t.draws) / n,
            f64::from(t.losses) / n,
        );
        let m = w + d / 2.0;
        let v = w * (1.0 - m).powi(2) + d * (0.5 - m).powi(2) + l * m.powi(2);
        if v <= 1e-12 {
            return 0.0;
        }
        let expected = |elo: f64| 1.0 / (1.0 + 10f64.powf(-elo / 400.0));
        let (s0, s1) = (expected(self.elo0), expected(self.elo1));
        n * (s1 - s0) * (2.0 * m - s0 - s1) / (2.0 * v)
    }

    /// Whether to stop, and with which answer.
    pub fn state(&self, t: &Tally) -> SprtState {
        let (lower, upper) = self.bounds();
        let llr = self.llr(t);
        if llr >= upper {
            SprtState::AcceptH1
        } else if llr <= lower {
            SprtState::AcceptH0
        } else {
            SprtState::Continue
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_score_is_zero_elo() {
        let t = Tally {
            wins: 10,
            draws: 20,
            losses: 10,
        };
        let e = t.elo();
        assert!(e.elo.abs() < 1e-9);
        assert!(e.error > 0.0 && e.error < 200.0);
    }

    #[test]
    fn a_clean_sweep_has_a_finite_lower_bound() {
        let e = Tally {
            wins: 40,
            draws: 0,
            losses: 0,
        }
        .elo();
        assert!(e.elo.is_infinite());
        assert!(e.lower.is_finite() && e.lower > 400.0, "{}", e.lower);
    }

    #[test]
    fn seventy_five_percent_is_about_191_elo() {
        let t = Tally {
            wins: 15,
            draws: 0,
            losses: 5,
        };
        assert!((t.elo().elo - 190.8).abs() < 0.5);
    }

    fn sprt(elo0: f64, elo1: f64) -> Sprt {
        Sprt {
            elo0,
            elo1,
            alpha: 0.05,
            beta: 0.05,
        }
    }

    #[test]
    fn sprt_bounds_are_the_usual_ones() {
        let (lo, hi) = sprt(0.0, 10.0).bounds();
        assert!(
            (lo + 2.944).abs() < 1e-3 && (hi - 2.944).abs() < 1e-3,
            "{lo} {hi}"
        );
    }

    #[test]
    fn sprt_accepts_the_hypothesis_the_games_support() {
        let s = sprt(0.0, 20.0);
        // An even match leans to H0, more with more games; a clear win goes to H1.
        let even = |n| Tally {
            wins: n,
            draws: 2 * n,
            losses: n,
        };
        assert!(s.llr(&even(50)) < 0.0);
        assert!(s.llr(&even(500)) < s.llr(&even(50)));
        assert_eq!(s.state(&even(500)), SprtState::AcceptH0);
        let strong = Tally {
            wins: 300,
            draws: 400,
            losses: 200,
        };
        assert!(s.llr(&strong) > 0.0);
        assert_eq!(s.state(&strong), SprtState::AcceptH1);
        assert_eq!(
            s.state(&Tally {
                wins: 3,
                draws: 4,
                losses: 2
            }),
            SprtState::Continue
        );
        assert_eq!(s.llr(&Tally::default()), 0.0);
    }

    #[test]
    fn sprt_llr_matches_a_hand_computation() {
        // 60 wins, 20 draws, 20 losses: m = 0.7, v = 0.6*0.09 + 0.2*0.04 + 0.2*0.49 = 0.16.
        let t = Tally {
            wins: 60,
            draws: 20,
            losses: 20,
        };
        let s = sprt(0.0, 100.0);
        let s1 = 1.0 / (1.0 + 10f64.powf(-0.25));
        let expected = 100.0 * (s1 - 0.5) * (1.4 - 0.5 - s1) / (2.0 * 0.16);
        assert!((s.llr(&t) - expected).abs() < 1e-9);
    }
}
