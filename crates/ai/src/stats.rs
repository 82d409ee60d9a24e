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
}
