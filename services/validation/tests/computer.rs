//! The computer as a player of live games: `ai:<level>` moves are asked of the configured computer
//! player and played through the normal move path, at once on the replica that made it the computer's
//! turn, by any replica's timers when that one has no computer player or died; with no computer at all
//! the rules end the game (a missed first move aborts it).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use draughts_engine::{Position, RuleSet, Variant};
use draughts_proto::vocab::player::Player;
use draughts_store::{Database, LiveStore, open_live_store};
use draughts_validation::games::computer::{ComputerPlayer, ComputerTurn};
use draughts_validation::games::record::TimeControlRec;
use draughts_validation::games::service::{GamesResult, NewGame};
use draughts_validation::games::{GamesCore, GamesError, SystemClock};

/// Plays the first legal move, counting its calls.
#[derive(Debug, Default)]
struct FirstMove {
    calls: AtomicUsize,
    fail: bool,
}

#[tonic::async_trait]
impl ComputerPlayer for FirstMove {
    async fn choose(&self, turn: ComputerTurn) -> GamesResult<String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err(GamesError::Refused("no engine".into()));
        }
        let pos = Position::from_fen(turn.rules, &turn.fen).unwrap();
        let mv = pos.legal_moves()[0];
        Ok(pos.move_to_text(&mv))
    }
}

async fn core(live: Arc<dyn LiveStore>) -> GamesCore {
    let db = Database::connect("sqlite::memory:").await.unwrap();
    GamesCore::new(live, db, Arc::new(SystemClock))
        .await
        .unwrap()
}

fn player(id: &str) -> Player {
    Player {
        name: id.into(),
        guest: !id.starts_with("ai:"),
        computer: id.starts_with("ai:"),
        ..Player::new(id.parse().expect("a player id"))
    }
}

/// English: Black (the computer here) moves first.
fn vs_computer() -> NewGame {
    let rules = RuleSet::new(Variant::English);
    NewGame {
        rules,
        time: TimeControlRec::Fischer {
            base_ms: 60_000,
            increment_ms: 0,
        },
        white: player("guest:w"),
        black: player("ai:3"),
        rated: false,
        start: Position::start(rules),
        berserk_allowed: false,
    }
}

async fn wait_for_ply(core: &GamesCore, id: &str, ply: u32) {
    for _ in 0..200 {
        if core.load(id).await.unwrap().0.ply() >= ply {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the game did not reach ply {ply}");
}

#[tokio::test]
async fn the_computer_answers_every_move_at_once() {
    let live = open_live_store("memory://", "t:").await.unwrap();
    let player = Arc::new(FirstMove::default());
    let core = core(live).await.with_computer(player.clone());
    let g = core.create(vs_computer()).await.unwrap();
    // Its first move comes without anyone calling (and without the timers running).
    wait_for_ply(&core, &g.id, 1).await;
    for ply in [2, 4, 6, 8] {
        let record = core.load(&g.id).await.unwrap().0;
        let pos = record.position().unwrap();
        let text = pos.move_to_text(&pos.legal_moves()[0]);
        core.play_move(&g.id, "guest:w", |p| p.parse_move(&text), None)
            .await
            .unwrap();
        wait_for_ply(&core, &g.id, ply + 1).await;
    }
    assert_eq!(
        player.calls.load(Ordering::SeqCst),
        5,
        "one search per turn"
    );
    // The moves went through the normal path: clocks and history as for anyone.
    let record = core.load(&g.id).await.unwrap().0;
    assert_eq!(record.ply(), 9);
    assert!(record.result.is_none());
}

#[tokio::test]
async fn another_replica_plays_for_one_without_a_computer() {
    let live = open_live_store("memory://", "t:").await.unwrap();
    let without = core(live.clone()).await;
    let player = Arc::new(FirstMove::default());
    let with = core(live).await.with_computer(player.clone());
    let timers = tokio::spawn(with.clone().run_timers(std::future::pending()));
    // Created where no computer plays: due at once in the schedule, claimed by the other replica.
    let g = without.create(vs_computer()).await.unwrap();
    wait_for_ply(&without, &g.id, 1).await;
    assert_eq!(player.calls.load(Ordering::SeqCst), 1);
    timers.abort();
}

#[tokio::test]
async fn without_an_answer_the_rules_end_the_game() {
    let live = open_live_store("memory://", "t:").await.unwrap();
    let failing = Arc::new(FirstMove {
        fail: true,
        ..Default::default()
    });
    let mut limits = draughts_validation::games::GamesLimits::defaults();
    limits.first_move_secs = 1;
    let core = core(live)
        .await
        .with_limits(limits)
        .with_computer(failing.clone());
    let timers = tokio::spawn(core.clone().run_timers(std::future::pending()));
    let g = core.create(vs_computer()).await.unwrap();
    let mut result = None;
    for _ in 0..60 {
        if let Some(r) = core.load(&g.id).await.unwrap().0.result {
            result = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let result = result.expect("the game ended");
    assert_eq!(result.outcome.key(), "aborted");
    assert!(
        result.description.contains("Black made no first move"),
        "{}",
        result.description
    );
    assert!(failing.calls.load(Ordering::SeqCst) >= 1, "it was asked");
    timers.abort();
}
