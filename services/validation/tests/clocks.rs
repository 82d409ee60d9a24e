//! Clocks kept by the server, on paused tokio time (`TokioClock` follows it): a flag falls with nobody calling, the increment is
//! added after each move, correspondence deadlines end the game.

use std::sync::Arc;
use std::time::Duration;

use draughts_engine::{Position, RuleSet, Variant};
use draughts_proto::vocab::player::Player;
use draughts_store::{Database, open_live_store};
use draughts_validation::games::record::TimeControlRec;
use draughts_validation::games::service::NewGame;
use draughts_validation::games::{GamesCore, TokioClock};

async fn core() -> GamesCore {
    let live = open_live_store("memory://", "t:").await.unwrap();
    let db = Database::connect("sqlite::memory:").await.unwrap();
    let core = GamesCore::new(live, db, Arc::new(TokioClock::default()))
        .await
        .unwrap();
    // Pause only now: connecting the database uses real timeouts that paused time would expire at once.
    tokio::time::pause();
    core
}

/// Equal within 2 ms: the tokio clock was read once before time was paused.
#[track_caller]
fn close(a: u64, b: u64) {
    assert!(a.abs_diff(b) <= 2, "{a} != {b} (within 2 ms)");
}

fn player(id: &str) -> Player {
    Player {
        name: id.into(),
        guest: true,
        ..Player::new(id.parse().expect("a player id"))
    }
}

fn new_game(time: TimeControlRec) -> NewGame {
    let rules = RuleSet::new(Variant::English);
    NewGame {
        rules,
        time,
        white: player("guest:w"),
        black: player("guest:b"),
        rated: false,
        start: Position::start(rules),
        berserk_allowed: false,
    }
}

async fn play(core: &GamesCore, id: &str, who: &str, mv: &str) {
    let text = mv.to_string();
    core.play_move(id, who, move |pos| pos.parse_move(&text), None)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_flag_falls_with_nobody_calling() {
    let core = core().await;
    let timers = tokio::spawn(core.clone().run_timers(std::future::pending()));
    let g = core
        .create(new_game(TimeControlRec::Fischer {
            base_ms: 60_000,
            increment_ms: 0,
        }))
        .await
        .unwrap();
    // English: Black moves first after 10 s and White answers after 5 s: first moves cost no time.
    tokio::time::sleep(Duration::from_secs(10)).await;
    play(&core, &g.id, "guest:b", "11-15").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    play(&core, &g.id, "guest:w", "23-19").await;
    let (r, _) = core.load(&g.id).await.unwrap();
    assert_eq!((r.black_ms, r.white_ms), (60_000, 60_000));
    assert!(r.result.is_none());
    // Now Black's clock runs: 59 s, still on...
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert!(core.load(&g.id).await.unwrap().0.result.is_none());
    // ...and past 60 s the server ends the game by itself.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (r, _) = core.load(&g.id).await.unwrap();
    let result = r.result.expect("the flag fell");
    assert_eq!(
        (result.outcome.key(), result.reason.key()),
        ("white", "time")
    );
    assert_eq!(r.black_ms, 0);
    // Archived durably and published on the finished stream. The database works in real time on its own
    // thread, so let time flow again and wait for it (retries, if any, come from the archive schedule).
    tokio::time::resume();
    for _ in 0..100 {
        if core.live().len("games.finished").await.unwrap() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(core.live().len("games.finished").await.unwrap(), 1);
    let (recent, _) = core.recent("guest:w", 10, None).await.unwrap();
    assert_eq!(recent.len(), 1);
    timers.abort();
}

#[tokio::test]
async fn the_increment_is_added_after_each_move() {
    let core = core().await;
    let g = core
        .create(new_game(TimeControlRec::Fischer {
            base_ms: 30_000,
            increment_ms: 5_000,
        }))
        .await
        .unwrap();
    // The first moves neither cost time nor earn the increment.
    tokio::time::sleep(Duration::from_secs(3)).await;
    play(&core, &g.id, "guest:b", "11-15").await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    play(&core, &g.id, "guest:w", "23-19").await;
    let (r, _) = core.load(&g.id).await.unwrap();
    assert_eq!((r.black_ms, r.white_ms), (30_000, 30_000));
    // From the second move on: time spent is taken, the increment added.
    tokio::time::sleep(Duration::from_secs(4)).await;
    play(&core, &g.id, "guest:b", "8-11").await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    play(&core, &g.id, "guest:w", "22-17").await;
    let (r, _) = core.load(&g.id).await.unwrap();
    close(r.black_ms, 30_000 - 4_000 + 5_000);
    close(r.white_ms, 30_000 - 6_000 + 5_000);
    close(r.moves[3].white_ms, 29_000);
    // A move after the flag fell is refused and the game is lost on time.
    tokio::time::sleep(Duration::from_secs(32)).await;
    let err = core
        .play_move(&g.id, "guest:b", |pos| pos.parse_move("9-13"), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("time"), "{err}");
    core.enforce_clock(&g.id).await.unwrap();
    let result = core.load(&g.id).await.unwrap().0.result.unwrap();
    assert_eq!(
        (result.outcome.key(), result.reason.key()),
        ("white", "time")
    );
}

#[tokio::test]
async fn correspondence_deadline_and_timeout_claim() {
    let core = core().await;
    let g = core
        .create(new_game(TimeControlRec::Correspondence {
            days_per_move: 2,
        }))
        .await
        .unwrap();
    play(&core, &g.id, "guest:b", "11-15").await;
    // A day and a half later White moves: Black gets two full days again.
    tokio::time::sleep(Duration::from_secs(36 * 3600)).await;
    play(&core, &g.id, "guest:w", "23-19").await;
    let (r, _) = core.load(&g.id).await.unwrap();
    assert_eq!(
        r.white_ms,
        2 * 86_400_000,
        "a full period again after the move"
    );
    // White claims too early: refused.
    let early = core
        .player_action(
            &g.id,
            "guest:w",
            draughts_validation::games::record::GameRecord::claim_timeout,
        )
        .await
        .unwrap_err();
    assert!(early.to_string().contains("still has"), "{early}");
    tokio::time::sleep(Duration::from_secs(2 * 86_400 + 1)).await;
    let r = core
        .player_action(
            &g.id,
            "guest:w",
            draughts_validation::games::record::GameRecord::claim_timeout,
        )
        .await
        .unwrap();
    let result = r.result.unwrap();
    assert_eq!(
        (result.outcome.key(), result.reason.key()),
        ("white", "time")
    );
}

/// A replica that claimed a due deadline and died before ending the game loses nothing: the claim runs
/// out and another replica's timer ends the game on time.
#[tokio::test]
async fn a_deadline_claimed_by_a_dead_replica_comes_back() {
    use draughts_validation::games::service::{CLAIM_RETRY, keys};
    let core = core().await;
    let g = core
        .create(new_game(TimeControlRec::Fischer {
            base_ms: 5_000,
            increment_ms: 0,
        }))
        .await
        .unwrap();
    // Both first moves, then Black's flag falls 5 s later; the "dead" replica claims the deadline at 6 s
    // and then does nothing.
    play(&core, &g.id, "guest:b", "11-15").await;
    play(&core, &g.id, "guest:w", "23-19").await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let claimed = core
        .live()
        .claim_due(keys::DEADLINES, core.now(), 10, CLAIM_RETRY)
        .await
        .unwrap();
    assert_eq!(claimed, std::slice::from_ref(&g.id));
    // A live replica's timer starts: nothing is due while the claim lasts...
    let timers = tokio::spawn(core.clone().run_timers(std::future::pending()));
    tokio::time::sleep(CLAIM_RETRY - Duration::from_secs(1)).await;
    assert!(core.load(&g.id).await.unwrap().0.result.is_none());
    // ...and once it runs out, the game ends on time, at Black's real deadline on the clock.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (r, _) = core.load(&g.id).await.unwrap();
    let result = r.result.expect("ended on time after the claim ran out");
    assert_eq!(
        (result.outcome.key(), result.reason.key()),
        ("white", "time")
    );
    assert_eq!(r.black_ms, 0);
    // Dealt with: nothing left in the schedule.
    assert_eq!(core.live().next_due(keys::DEADLINES).await.unwrap(), None);
    timers.abort();
}

/// Before both sides have moved no clock runs: a side that makes no first move within its time for it
/// gets the game aborted (never lost on time, never rated), and so does a resignation before then.
#[tokio::test]
async fn games_that_end_before_both_sides_moved_are_aborted() {
    let core = core().await;
    let timers = tokio::spawn(core.clone().run_timers(std::future::pending()));
    let mut rated = new_game(TimeControlRec::Fischer {
        base_ms: 1,
        increment_ms: 0,
    });
    rated.rated = true;
    // A 1 ms game: its clock would have fallen at once; the first move has 30 s.
    let g = core.create(rated.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert!(core.load(&g.id).await.unwrap().0.result.is_none());
    play(&core, &g.id, "guest:b", "11-15").await;
    // White never answers: aborted after its 30 s.
    tokio::time::sleep(Duration::from_secs(31)).await;
    let (r, _) = core.load(&g.id).await.unwrap();
    let result = r.result.clone().expect("aborted");
    assert_eq!(result.outcome.key(), "aborted");
    assert!(
        result.description.contains("White made no first move"),
        "{}",
        result.description
    );
    assert!(!r.counts_for_rating());
    // Resigning before both sides moved aborts too.
    let g = core.create(rated).await.unwrap();
    play(&core, &g.id, "guest:b", "11-15").await;
    let r = core
        .player_action(
            &g.id,
            "guest:b",
            draughts_validation::games::record::GameRecord::resign,
        )
        .await
        .unwrap();
    assert_eq!(r.result.unwrap().outcome.key(), "aborted");
    timers.abort();
}

/// A finished game shows each side's time at the end, the time spent on the last turn included.
#[tokio::test]
async fn clocks_after_the_end_show_the_time_left_at_the_end() {
    let core = core().await;
    let g = core
        .create(new_game(TimeControlRec::Fischer {
            base_ms: 60_000,
            increment_ms: 0,
        }))
        .await
        .unwrap();
    play(&core, &g.id, "guest:b", "11-15").await;
    play(&core, &g.id, "guest:w", "23-19").await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let r = core
        .player_action(
            &g.id,
            "guest:b",
            draughts_validation::games::record::GameRecord::resign,
        )
        .await
        .unwrap();
    close(r.black_ms, 53_000);
    // Read later, the clocks stay where they stopped.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (r, _) = core.load(&g.id).await.unwrap();
    let side = r.side_to_move().unwrap();
    let (white, black) = r.clocks_at(side, core.now());
    close(black, 53_000);
    assert_eq!(white, 60_000);
}
