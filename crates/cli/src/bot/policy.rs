//! The bridge's pure decisions: which invitations to accept (and the reason given for the others),
//! how much of its clock the engine may spend on a move, and when a draw is fair. No I/O here.

use std::time::Duration;

use draughts_engine::{RuleSet, Variant};
use draughts_proto::pb;

/// Which games the bot accepts.
#[derive(Clone, Debug)]
pub(crate) struct Filters {
    /// Variants accepted (already narrowed to those the engine plays).
    pub(crate) variants: Vec<Variant>,
    pub(crate) rated: bool,
    pub(crate) casual: bool,
    /// Fischer clocks: the base time in this range, seconds (inclusive).
    pub(crate) min_base_secs: u64,
    pub(crate) max_base_secs: u64,
    /// Fischer clocks: at most this increment, seconds.
    pub(crate) max_increment_secs: u64,
    /// Whether correspondence games (days per move) are accepted.
    pub(crate) correspondence: bool,
    /// Games played at once; [`Filters::judge`] declines invitations beyond as "later" (the events
    /// loop first queues up to as many, accepted as games end).
    pub(crate) max_games: usize,
    /// Only games from the standard start position (a bot's engine may not know every FEN's rules).
    pub(crate) start_position_only: bool,
}

/// Accept, or decline with a reason from Games' fixed list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Accept,
    Decline(pb::DeclineReason),
}

impl Filters {
    /// What to answer `invitation` while `playing` games are going on (or being accepted).
    pub(crate) fn judge(&self, invitation: &pb::Invitation, playing: usize) -> Verdict {
        use pb::DeclineReason as Why;
        // The variant's own rules only: an engine knows no house rules.
        let rules = draughts_proto::convert::rule_set(invitation.rules.as_ref()).ok();
        match rules {
            Some(r) if self.variants.contains(&r.variant()) && r == RuleSet::new(r.variant()) => {}
            _ => return Verdict::Decline(Why::Variant),
        }
        if self.start_position_only && !invitation.fen.is_empty() {
            return Verdict::Decline(Why::Variant);
        }
        if invitation.rated && !self.rated {
            return Verdict::Decline(Why::Casual);
        }
        if !invitation.rated && !self.casual {
            return Verdict::Decline(Why::Rated);
        }
        use pb::time_control::Kind;
        match invitation
            .time_control
            .as_ref()
            .and_then(|t| t.kind.as_ref())
        {
            Some(Kind::Fischer(f)) => {
                let base = f.base_ms / 1000;
                if base < self.min_base_secs {
                    return Verdict::Decline(Why::TooFast);
                }
                if base > self.max_base_secs || f.increment_ms / 1000 > self.max_increment_secs {
                    return Verdict::Decline(Why::TooSlow);
                }
            }
            Some(Kind::Correspondence(_)) if self.correspondence => {}
            Some(Kind::Correspondence(_)) => return Verdict::Decline(Why::TooSlow),
            None => return Verdict::Decline(Why::TimeControl),
        }
        if playing >= self.max_games {
            return Verdict::Decline(Why::Later);
        }
        Verdict::Accept
    }
}

/// The engine's time for one move: `remaining / 30 + 0.8 * increment`, at most half of what remains,
/// less `overhead` (the network and the bridge, kept in reserve), at least 10 ms. For correspondence
/// (`correspondence` true) at most `correspondence_cap`.
///
/// ```ignore
/// // 60 s left, 1 s increment, 100 ms reserve: 60/30 + 0.8 = 2.8 s.
/// assert_eq!(think_time(60_000, 1_000, false, 100, cap), Duration::from_millis(2_800));
/// ```
pub(crate) fn think_time(
    remaining_ms: u64,
    increment_ms: u64,
    correspondence: bool,
    overhead_ms: u64,
    correspondence_cap: Duration,
) -> Duration {
    let usable = remaining_ms.saturating_sub(overhead_ms);
    let budget = (remaining_ms / 30 + increment_ms * 4 / 5).min(usable / 2);
    let budget = Duration::from_millis(budget.max(10));
    if correspondence {
        budget.min(correspondence_cap)
    } else {
        budget
    }
}

/// What the bridge does about draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Draws {
    /// Declines every draw offer and never offers one.
    Never,
    /// Accepts an offer, and offers one itself, when the engine's score says the game is level
    /// ([`DrawRule`]); declines otherwise.
    Engine,
}

/// When the engine's scores call the game a draw: the game has at least `min_ply` plies, and the
/// engine's last [`DrawRule::SCORES`] scores (in men, from its own side, as the Hub protocol's `info`
/// lines give them) are all within `margin` of 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct DrawRule {
    pub(crate) draws: Draws,
    pub(crate) margin: f64,
    pub(crate) min_ply: u32,
}

impl DrawRule {
    /// How many of the engine's latest scores must agree.
    pub(crate) const SCORES: usize = 3;
    /// Plies between two offers of the bridge (an offer stands until answered or a move is played).
    pub(crate) const OFFER_EVERY_PLIES: u32 = 20;

    /// Whether the game, at `plies` with the engine's `scores` (oldest first), is a draw by the rule.
    pub(crate) fn level(&self, plies: u32, scores: &[f64]) -> bool {
        self.draws == Draws::Engine
            && plies >= self.min_ply
            && scores.len() >= Self::SCORES
            && scores[scores.len() - Self::SCORES..]
                .iter()
                .all(|s| s.is_finite() && s.abs() <= self.margin)
    }

    /// Whether to offer a draw now, `last_offer` being the ply of the bridge's previous offer.
    pub(crate) fn offer(&self, plies: u32, scores: &[f64], last_offer: Option<u32>) -> bool {
        self.level(plies, scores)
            && last_offer.is_none_or(|at| plies >= at.saturating_add(Self::OFFER_EVERY_PLIES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_by_the_engine_s_scores() {
        let rule = DrawRule {
            draws: Draws::Engine,
            margin: 0.2,
            min_ply: 30,
        };
        let level = [0.1, -0.15, 0.0];
        assert!(rule.level(30, &level));
        assert!(
            rule.level(80, &[3.0, 0.1, -0.15, 0.0]),
            "the last three count"
        );
        assert!(!rule.level(29, &level), "too early");
        assert!(!rule.level(40, &level[1..]), "too few scores");
        assert!(!rule.level(40, &[0.1, 0.25, 0.0]), "one outside the margin");
        assert!(!rule.level(40, &[0.1, -0.21, 0.0]), "on either side");
        assert!(!rule.level(40, &[0.1, f64::NAN, 0.0]));
        let never = DrawRule {
            draws: Draws::Never,
            ..rule
        };
        assert!(!never.level(80, &level));
        // Offers: when level, and not again within OFFER_EVERY_PLIES of the last one.
        assert!(rule.offer(40, &level, None));
        assert!(!rule.offer(40, &level, Some(31)));
        assert!(rule.offer(51, &level, Some(31)));
        assert!(!rule.offer(51, &[1.0, 1.0, 1.0], None));
    }

    fn filters() -> Filters {
        Filters {
            variants: vec![Variant::International, Variant::English],
            rated: true,
            casual: true,
            min_base_secs: 30,
            max_base_secs: 600,
            max_increment_secs: 10,
            correspondence: false,
            max_games: 2,
            start_position_only: true,
        }
    }

    fn invitation(variant: Variant, rated: bool, base_ms: u64, inc_ms: u64) -> pb::Invitation {
        pb::Invitation {
            rules: Some(draughts_proto::convert::rules_to_wire(variant.into())),
            rated,
            time_control: Some(pb::TimeControl {
                kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                    base_ms,
                    increment_ms: inc_ms,
                })),
            }),
            ..Default::default()
        }
    }

    #[track_caller]
    fn check(f: &Filters, inv: &pb::Invitation, playing: usize, expected: Verdict) {
        assert_eq!(f.judge(inv, playing), expected);
    }

    #[test]
    fn invitations_are_judged_by_the_filters() {
        use Verdict::*;
        use pb::DeclineReason as Why;
        let f = filters();
        let ok = invitation(Variant::International, true, 60_000, 1_000);
        check(&f, &ok, 0, Accept);
        check(&f, &ok, 1, Accept);
        check(&f, &ok, 2, Decline(Why::Later));
        check(
            &f,
            &invitation(Variant::Russian, true, 60_000, 0),
            0,
            Decline(Why::Variant),
        );
        check(
            &f,
            &invitation(Variant::English, false, 10_000, 0),
            0,
            Decline(Why::TooFast),
        );
        check(
            &f,
            &invitation(Variant::English, false, 900_000, 0),
            0,
            Decline(Why::TooSlow),
        );
        check(
            &f,
            &invitation(Variant::English, false, 60_000, 30_000),
            0,
            Decline(Why::TooSlow),
        );
        let casual_only = Filters {
            rated: false,
            ..filters()
        };
        check(&casual_only, &ok, 0, Decline(Why::Casual));
        let rated_only = Filters {
            casual: false,
            ..filters()
        };
        check(
            &rated_only,
            &invitation(Variant::English, false, 60_000, 0),
            0,
            Decline(Why::Rated),
        );
        let mut from_fen = ok.clone();
        from_fen.fen = "W:W31:B20".into();
        check(&f, &from_fen, 0, Decline(Why::Variant));
        let mut house_rules = ok.clone();
        let options = draughts_engine::RuleOptions::parse("no-mandatory-capture").unwrap();
        let rules = RuleSet::with_options(Variant::English, options).unwrap();
        house_rules.rules = Some(draughts_proto::convert::rules_to_wire(rules));
        check(&f, &house_rules, 0, Decline(Why::Variant));
        let mut correspondence = ok.clone();
        correspondence.time_control = Some(pb::TimeControl {
            kind: Some(pb::time_control::Kind::Correspondence(pb::Correspondence {
                days_per_move: 1,
            })),
        });
        check(&f, &correspondence, 0, Decline(Why::TooSlow));
        let mut no_clock = ok;
        no_clock.time_control = None;
        check(&f, &no_clock, 0, Decline(Why::TimeControl));
    }

    #[test]
    fn think_time_follows_the_clock() {
        let cap = Duration::from_secs(5);
        let ms = Duration::from_millis;
        assert_eq!(think_time(60_000, 1_000, false, 100, cap), ms(2_800));
        assert_eq!(think_time(60_000, 0, false, 100, cap), ms(2_000));
        // Short of time: at most half of what remains after the reserve, never under 10 ms.
        assert_eq!(think_time(1_000, 5_000, false, 100, cap), ms(450));
        assert_eq!(think_time(50, 0, false, 100, cap), ms(10));
        // Correspondence: capped.
        assert_eq!(think_time(86_400_000, 0, true, 100, cap), cap);
    }
}
