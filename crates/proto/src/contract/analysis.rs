//! The typed contract of everything the analysis queue keeps in the live store (Redis or memory): names,
//! versioned payloads (JSON with a version field `v`; readers ignore unknown fields and refuse a version
//! they do not know), encode and decode. The analysis service's edge, queue and workers use these types
//! and nothing else; another service that queues a job (e.g. Games for a computer move) writes the same
//! [`JobRecord`] and [`JobEntry`] and reads the same [`JobResult`].
//!
//! | name | kind | payload | writer | readers |
//! |---|---|---|---|---|
//! | `analysis.{jobs}.computer`, `analysis.{jobs}.interactive`, `analysis.{jobs}.guest`, `analysis.{jobs}.bulk` | streams, group `analysis-workers`, one hash tag (an idle worker blocks on all three in one read) | [`JobEntry`] (a new job's with its first record) | the queue (enqueue, hand back) | workers |
//! | `analysis-job:{<job id>}` | versioned key, TTL = result TTL | [`JobRecord`] | the queue, the worker running it | the edge (Get/Watch), workers |
//! | `analysis-events:<job id>` | pub/sub | [`JobEvent`] | whoever changes the record | watchers, BestMove callers, the running worker (cancel) |
//! | `analysis.finished` | pub/sub | [`Finished`] (a computer move's with its final record) | whoever makes a record final | BestMove callers (one subscription per process) |
//! | `analysis-dedup:<fingerprint>` | versioned key, TTL | a job id | enqueue | enqueue (merging) |
//! | `analysis-cache:<fingerprint>` | versioned key, TTL | [`JobResult`] (JSON, `v`) | workers | enqueue |
//! | `analysis-run:<job id>` | lease | the worker slot running it | workers | workers (a claimed entry whose lease is held is left alone) |
//! | `analysis.workers` | stream (trimmed) | [`Heartbeat`] | every worker, each second | QueueStatus |
//!
//! Job record states: `queued -> running -> done | failed | cancelled`; `running -> queued` when a worker
//! hands a job back at shutdown or after a failed attempt. A record in a final state never changes again.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::ids::PlayerId;

/// The version every payload here is written with, and the only one read.
pub const VERSION: u32 = 1;

/// The consumer group of every job stream.
pub const GROUP: &str = "analysis-workers";
/// Every job that reaches a final state ([`Finished`]): one subscription per API replica wakes all
/// its BestMove callers.
pub const FINISHED_CHANNEL: &str = "analysis.finished";
/// Heartbeats of the workers.
pub const WORKERS_STREAM: &str = "analysis.workers";

/// The queue classes, in priority order (the order of the variants).
///
/// `guest` is newer than the others: a worker of an older build does not read its stream, and an
/// older reader refuses a record of that class (a version-1 reader knows three classes), so guests'
/// BestMove jobs run only on workers of this build; deploy workers before the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Computer opponents' moves in live games (and BestMove of services' API keys).
    ComputerMove,
    /// Users' AnalyzePosition and AnalyzeGame, and BestMove of players with the analysis scope.
    Interactive,
    /// Guests' BestMove.
    Guest,
    /// Background work.
    Bulk,
}

impl Class {
    /// Highest priority first.
    pub const ALL: [Class; 4] = [
        Class::ComputerMove,
        Class::Interactive,
        Class::Guest,
        Class::Bulk,
    ];

    /// Every class's stream, in priority order: one hash tag, so one read can wait on all of them.
    pub const STREAMS: [&'static str; 4] = [
        Class::ComputerMove.stream(),
        Class::Interactive.stream(),
        Class::Guest.stream(),
        Class::Bulk.stream(),
    ];

    /// The class's job stream.
    pub const fn stream(self) -> &'static str {
        match self {
            Class::ComputerMove => "analysis.{jobs}.computer",
            Class::Interactive => "analysis.{jobs}.interactive",
            Class::Guest => "analysis.{jobs}.guest",
            Class::Bulk => "analysis.{jobs}.bulk",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Class::ComputerMove => "computer_move",
            Class::Interactive => "interactive",
            Class::Guest => "guest",
            Class::Bulk => "bulk",
        }
    }
}

/// The key of a job record (the braces make it a Redis Cluster hash tag).
pub fn job_key(job_id: &str) -> String {
    format!("analysis-job:{{{job_id}}}")
}
/// The channel announcing changes of a job.
pub fn events_channel(job_id: &str) -> String {
    format!("analysis-events:{job_id}")
}
/// Where a pending identical request points to its job.
pub fn dedup_key(fingerprint: &str) -> String {
    format!("analysis-dedup:{fingerprint}")
}
/// The evaluation cache entry of a request.
pub fn cache_key(fingerprint: &str) -> String {
    format!("analysis-cache:{fingerprint}")
}
/// The lease of the worker slot running a job.
pub fn run_lease(job_id: &str) -> String {
    format!("analysis-run:{job_id}")
}

/// A payload that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not a JSON payload: {0}")]
    Json(#[from] serde_json::Error),
    #[error("unknown payload version {0} (this build reads version {VERSION})")]
    Version(u32),
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

/// Encodes a payload (always with `v` = [`VERSION`] set by the type).
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("contract types always serialise")
}

/// Decodes a payload: reads `v` first and refuses an unknown version.
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, DecodeError> {
    let VersionOnly { v } = serde_json::from_slice(bytes)?;
    if v != VERSION {
        return Err(DecodeError::Version(v));
    }
    Ok(serde_json::from_slice(bytes)?)
}

fn version() -> u32 {
    VERSION
}

/// One entry of a job stream: which job to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEntry {
    #[serde(default = "version")]
    pub v: u32,
    pub job_id: String,
    /// The record as it was first written (version 1), on the entry that queues a new job: the
    /// worker that gets the entry marks the job RUNNING by a compare-and-set against version 1
    /// without reading the record first (any change since, a merge or a cancel, makes that fail
    /// and the worker reads the record). Absent on the entries of jobs handed back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Box<JobRecord>>,
}

/// What [`FINISHED_CHANNEL`] carries: the job that became final and, for a computer move, its
/// final record (a BestMove caller answers from it without reading the record; other jobs' records
/// can be large and are read by those who want them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    #[serde(default = "version")]
    pub v: u32,
    pub job_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Box<JobRecord>>,
}

impl Finished {
    /// Reads a notice; a payload that is not one (a bare job id, as written before the notice
    /// carried records) is that job's notice without a record.
    pub fn read(payload: &[u8]) -> Finished {
        decode::<Finished>(payload).unwrap_or_else(|_| Finished {
            v: VERSION,
            job_id: String::from_utf8_lossy(payload).into_owned(),
            record: None,
        })
    }
}

/// Search limits of a job (unset: no such limit). The queue always sets a time cap.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JobLimits {
    pub depth: Option<u32>,
    pub nodes: Option<u64>,
    pub movetime_ms: Option<u64>,
    /// At least 1.
    pub multi_pv: u32,
}

/// Rules as stable text: `Variant::key()` and `RuleOptions` display text (empty: none).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rules {
    pub variant: String,
    #[serde(default)]
    pub options: String,
}

/// A start position and the moves played from it, as move texts in the variant's notation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Line {
    pub rules: Rules,
    /// Normalised FEN.
    pub fen: String,
    pub moves: Vec<String>,
}

/// What a job does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobSpec {
    /// Analyse the position after `line`.
    Position { line: Line, limits: JobLimits },
    /// Analyse every ply of the game `line`.
    Game {
        line: Line,
        limits: JobLimits,
        #[serde(default)]
        game_id: Option<String>,
    },
    /// Choose a move at the position after `line`: a level (1-8) or limits.
    BestMove {
        line: Line,
        #[serde(default)]
        level: Option<u8>,
        #[serde(default)]
        limits: Option<JobLimits>,
        /// Extra time cap from the clock, milliseconds.
        #[serde(default)]
        clock_cap_ms: Option<u64>,
        #[serde(default)]
        seed: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Failed | JobState::Cancelled
        )
    }
}

/// A move as the API describes it (the fields of `draughts.v1.Move`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveOut {
    pub notation: String,
    pub from: String,
    pub to: String,
    pub path: Vec<String>,
    pub captured: Vec<String>,
    #[serde(default)]
    pub promotes: bool,
}

/// A score for the side to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreOut {
    CentiMen(i32),
    WinIn(u32),
    LossIn(u32),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineOut {
    pub score: ScoreOut,
    pub pv: Vec<MoveOut>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PositionResult {
    /// Normalised FEN of the analysed position.
    pub fen: String,
    pub lines: Vec<LineOut>,
    pub depth: u32,
    pub seldepth: u32,
    pub nodes: u64,
    pub elapsed_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    Good,
    Inaccuracy,
    Mistake,
    Blunder,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlyOut {
    /// 1-based.
    pub ply: u32,
    /// `white` or `black`.
    pub side: String,
    pub played: MoveOut,
    pub best: Option<MoveOut>,
    pub score_before: Option<ScoreOut>,
    pub score_after: Option<ScoreOut>,
    pub loss_centi_men: u32,
    pub judgement: Judgement,
    pub pv: Vec<MoveOut>,
    /// Depth of the search before the move.
    #[serde(default)]
    pub depth: u32,
    #[serde(default)]
    pub nodes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideSummaryOut {
    pub side: String,
    pub moves: u32,
    pub inaccuracies: u32,
    pub mistakes: u32,
    pub blunders: u32,
    pub average_loss_centi_men: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GameResult {
    pub rules: Rules,
    pub start_fen: String,
    pub plies: Vec<PlyOut>,
    pub summary: Vec<SideSummaryOut>,
    #[serde(default)]
    pub game_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BestMoveResult {
    pub mv: MoveOut,
    pub score: Option<ScoreOut>,
    pub depth: u32,
    pub nodes: u64,
    pub search_ms: u64,
}

/// The outcome of a job (also the evaluation cache's value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobResult {
    Position(PositionResult),
    Game(GameResult),
    BestMove(BestMoveResult),
}

/// A cache entry: a result with its version field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedResult {
    #[serde(default = "version")]
    pub v: u32,
    pub result: JobResult,
}

/// What a running job has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressRec {
    /// Grows by one with every progress write (watchers compare it).
    pub seq: u64,
    pub depth: u32,
    pub nodes: u64,
    /// Position jobs: the lines of the last finished depth.
    #[serde(default)]
    pub lines: Vec<LineOut>,
    /// Game jobs: the plies finished so far, in order, and the game's total.
    #[serde(default)]
    pub plies: Vec<PlyOut>,
    #[serde(default)]
    pub plies_total: u32,
}

/// A job: its request, its state and its result. Stored under [`job_key`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    #[serde(default = "version")]
    pub v: u32,
    pub job_id: String,
    pub class: Class,
    pub spec: JobSpec,
    pub state: JobState,
    /// Player ids of the callers who asked for it (merged requests add theirs). Empty for server jobs.
    #[serde(default)]
    pub owners: Vec<PlayerId>,
    /// Identifies (rules, position, limits) for merging and caching; empty: never merged or cached.
    #[serde(default)]
    pub fingerprint: String,
    pub created_ms: u64,
    #[serde(default)]
    pub started_ms: u64,
    #[serde(default)]
    pub finished_ms: u64,
    /// Attempts started (each one is a "run": the worker of run N may only finish run N).
    #[serde(default)]
    pub attempts: u32,
    /// The slot running the current attempt.
    #[serde(default)]
    pub worker: Option<String>,
    /// The stream entry that queues it (`MS-SEQ`), for its place in the queue.
    #[serde(default)]
    pub entry_id: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub progress: Option<ProgressRec>,
    #[serde(default)]
    pub result: Option<JobResult>,
    /// W3C trace context of the request (`traceparent`, `tracestate`).
    #[serde(default)]
    pub trace: HashMap<String, String>,
    /// When the record expires, Unix ms.
    #[serde(default)]
    pub expires_ms: u64,
}

/// A change of a job, announced on [`events_channel`]: a wake-up, the record is the truth.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEvent {
    #[serde(default = "version")]
    pub v: u32,
    pub state: JobState,
}

/// A worker process's heartbeat on [`WORKERS_STREAM`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    #[serde(default = "version")]
    pub v: u32,
    pub worker: String,
    /// Searches it can run at once.
    pub slots: u32,
    /// Searches it is running.
    pub running: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_example_decodes_and_unknown_fields_are_ignored() {
        let text = br#"{"v":1,"job_id":"ab","class":"interactive","state":"queued","created_ms":5,
            "spec":{"kind":"position","line":{"rules":{"variant":"english"},"fen":"B:W21:B1","moves":[]},
                    "limits":{"depth":4,"nodes":null,"movetime_ms":null,"multi_pv":1}},
            "a_field_from_the_future":true}"#;
        let record: JobRecord = decode(text).unwrap();
        assert_eq!(record.class, Class::Interactive);
        assert_eq!(record.attempts, 0);
        let again: JobRecord = decode(&encode(&record)).unwrap();
        assert_eq!(again, record);
    }

    #[test]
    fn finished_notices_read_with_or_without_a_record() {
        let bare = Finished::read(b"0123abcd");
        assert_eq!((bare.job_id.as_str(), bare.record), ("0123abcd", None));
        let record: JobRecord = decode(
            br#"{"v":1,"job_id":"ab","class":"computer_move","state":"done","created_ms":5,
            "spec":{"kind":"position","line":{"rules":{"variant":"english"},"fen":"B:W21:B1","moves":[]},
                    "limits":{"depth":4,"nodes":null,"movetime_ms":null,"multi_pv":1}}}"#,
        )
        .unwrap();
        let notice = Finished {
            v: VERSION,
            job_id: "ab".into(),
            record: Some(Box::new(record.clone())),
        };
        assert_eq!(Finished::read(&encode(&notice)), notice);
        // An entry without a record (a handed-back job) is what older writers wrote.
        let entry: JobEntry = decode(br#"{"v":1,"job_id":"ab"}"#).unwrap();
        assert_eq!(entry.record, None);
        assert_eq!(encode(&entry), br#"{"v":1,"job_id":"ab"}"#.to_vec());
        let with_record = JobEntry {
            record: Some(Box::new(record)),
            ..entry
        };
        assert_eq!(
            decode::<JobEntry>(&encode(&with_record)).unwrap(),
            with_record
        );
    }

    #[test]
    fn unknown_versions_are_refused() {
        let err = decode::<JobEntry>(br#"{"v":2,"job_id":"ab"}"#).unwrap_err();
        assert!(matches!(err, DecodeError::Version(2)));
        assert!(decode::<JobEntry>(b"not json").is_err());
    }

    #[test]
    fn a_record_written_before_typed_owners_writes_back_byte_for_byte() {
        // As the writer wrote it while owners were strings.
        let before = br#"{"v":1,"job_id":"ab","class":"interactive","spec":{"kind":"position","line":{"rules":{"variant":"english","options":""},"fen":"B:W21:B1","moves":[]},"limits":{"depth":4,"nodes":null,"movetime_ms":null,"multi_pv":1}},"state":"queued","owners":["player:ann","ai:3"],"fingerprint":"","created_ms":5,"started_ms":0,"finished_ms":0,"attempts":0,"worker":null,"entry_id":null,"error":null,"progress":null,"result":null,"trace":{},"expires_ms":0}"#;
        let record: JobRecord = decode(before).unwrap();
        assert_eq!(record.owners, ["player:ann", "ai:3"]);
        assert_eq!(encode(&record), before.to_vec());
        // Owners are checked on read.
        let text = String::from_utf8(before.to_vec())
            .unwrap()
            .replace("ai:3", "ai:9");
        assert!(decode::<JobRecord>(text.as_bytes()).is_err());
    }
}
