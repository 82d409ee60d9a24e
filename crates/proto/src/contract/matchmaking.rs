//! Matchmaking's live state (`services/matchmaking`): every name and versioned payload it keeps in the
//! live store. Written and read only by matchmaking replicas; several replicas share them on Redis.
//!
//! Names below: `<id>` stands for a value; `{mm}` is literal, a hash tag ([`GROUP_TAG`]): every name
//! with it is in one group (`draughts_store::keys`), so the atomic writes of a ticket with its pools
//! and commits are in one slot of a Redis Cluster (all of matchmaking's schedules on one primary).
//!
//! | name | kind | payload | what |
//! |---|---|---|---|
//! | `mm-ticket:{mm}<id>` | versioned key, TTL | [`Ticket`] | one quick-pairing seek (a Seek call, in one or more pools) and how it ended |
//! | `mm-player:<player>` | versioned key, TTL | the ticket id (UTF-8) | the player's one seek, so a reconnect (to any replica) joins it |
//! | `mm-pool:{mm}<pool>` | pinned schedule | member [`Member`] (JSON text), time = when the seek lapses unless a stream renews it | a pool's waiting seeks, read in one round trip by the wave |
//! | `mm-wave:<pool>` | versioned key, TTL | [`WaveLease`] | who runs the pool's waves; its version is the fencing token |
//! | `mm-commits:{mm}` | pinned schedule | member [`Commit`] (JSON text), time = when another replica may finish it | pairings claimed but not finished: finished by any replica after a crash |
//! | `mm-ticket-events:<id>` | pub/sub | `{"v":1}` | a wake-up: the ticket changed, re-read it |
//! | `mm-pokes` | pub/sub | `{"v":1,"pool":"<pool id>"}` ([`encode_poke`]) | a seek joined the pool: its wave runner may run a wave at once |
//! | `mm-stats:<pool>` | versioned key | [`PoolStats`] | the pool's typical wait |
//! | `mm-online:{mm}` | pinned schedule | member = player id, time = last seen + 60 s | players online |
//! | `mm-lobby:{mm}` | pinned schedule | member = lobby seek id, time = when it lapses: its expiry, or for a real-time seek its owner's last heartbeat + 60 s if sooner | the lobby's open seeks, pruned in the background |
//! | `mm-lobby-new:{mm}` and `mm-lobby-new:{mm}<variant>` | pinned schedule | member = lobby seek id, time = [`LISTING_EPOCH_MS`] - creation (so the newest come first) | the listing index: a page is one read |
//! | `mm-lobby-of:{mm}<player>` | pinned schedule | member = lobby seek id (time = its expiry) or `r:<token>`, a place reserved while a seek is made (time = a minute on) | one player's lobby seeks (the per-player bound) |
//! | `mm-gate:<set>` | versioned key, TTL 1 day | `1` | the gate of a per-player or per-address set: each place taken bumps its version in the same compare-and-set (the bound is atomic) |
//! | `mm-lobby-at:{mm}<address>` | pinned schedule | as `mm-lobby-of` | the lobby seeks made from one client address (IPv6 by network: the per-address bound) |
//! | `mm-avoid:{mm}` | pinned schedule | member = two player ids, sorted, with a space between ([`avoid_member`]), time = when it lapses (10 min) | pairs Games refused to seat together (one blocks the other): waves do not pair them |
//! | `mm-lobby-seek:<id>` | versioned key, TTL = expiry + 10 min | [`LobbySeek`] | a listed custom game (an open invitation of Games) |
//!
//! Every payload is JSON with `"v":1`; readers ignore unknown fields and refuse other versions
//! ([`DecodeError::Version`]). Schedule members are payloads too: a member is written once (when the seek
//! starts) and its exact text is kept in the ticket, so that it can be renewed and removed.
//!
//! ```
//! use draughts_proto::contract::matchmaking::{self as mm, Member};
//!
//! let m = Member { ticket: "t1".parse().unwrap(), player: "guest:ab".parse().unwrap(), rating: 1500, provisional: true,
//!     guest: true, aborter: false, range: None, since_ms: 7 };
//! let text = mm::encode_member(&m);
//! assert_eq!(mm::decode_member(&text).unwrap(), m);
//! assert!(mm::decode_member(r#"{"v":2}"#).is_err());
//! assert_eq!(mm::pool_set("english-3+2-rated"), "mm-pool:{mm}english-3+2-rated");
//! ```

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::ids::{GameId, PlayerId, TicketId};

/// The schema version written.
pub const VERSION: u32 = 1;

/// Matchmaking's group: the hash tag of every name that a ticket write touches atomically (the ticket,
/// its pools, the pending commits), so that each such write is in one slot of a Redis Cluster.
pub const GROUP_TAG: &str = "{mm}";

pub fn ticket_key(id: &str) -> String {
    format!("mm-ticket:{GROUP_TAG}{id}")
}
pub fn player_key(player: &str) -> String {
    format!("mm-player:{player}")
}
pub fn pool_set(pool: &str) -> String {
    format!("mm-pool:{GROUP_TAG}{pool}")
}
pub fn wave_key(pool: &str) -> String {
    format!("mm-wave:{pool}")
}
pub const COMMITS: &str = "mm-commits:{mm}";
pub fn ticket_channel(id: &str) -> String {
    format!("mm-ticket-events:{id}")
}
pub fn stats_key(pool: &str) -> String {
    format!("mm-stats:{pool}")
}
pub const ONLINE: &str = "mm-online:{mm}";
pub const LOBBY: &str = "mm-lobby:{mm}";
pub fn lobby_of(player: &str) -> String {
    format!("mm-lobby-of:{GROUP_TAG}{player}")
}
pub fn lobby_seek_key(id: &str) -> String {
    format!("mm-lobby-seek:{id}")
}
/// Pairs that waves must not make (Games refused them: one blocks the other).
pub const AVOID: &str = "mm-avoid:{mm}";
/// The member of [`AVOID`] for players `a` and `b` (either order).
pub fn avoid_member(a: &str, b: &str) -> String {
    if a <= b {
        format!("{a} {b}")
    } else {
        format!("{b} {a}")
    }
}
/// The two players of an [`AVOID`] member.
pub fn avoid_pair(member: &str) -> Option<(&str, &str)> {
    member.split_once(' ')
}
/// The lobby's listing index of all seeks (`variant` `None`) or of one variant's (its key).
pub fn lobby_index(variant: Option<&str>) -> String {
    format!("mm-lobby-new:{GROUP_TAG}{}", variant.unwrap_or_default())
}
/// The gate of a per-player or per-address set of lobby seeks: a key whose version every place taken
/// in `set` bumps (the compare-and-set that makes the bound atomic); same hash slot as `set`.
pub fn lobby_gate(set: &str) -> String {
    format!("mm-gate:{set}")
}
/// The lobby seeks made from one client address.
pub fn lobby_at(address: &str) -> String {
    format!("mm-lobby-at:{GROUP_TAG}{address}")
}
/// The time of a seek in the listing index is this minus its creation time (2100-01-01 in Unix
/// milliseconds): the schedule reads earliest first, so a page of it is the newest seeks.
pub const LISTING_EPOCH_MS: u64 = 4_102_444_800_000;
pub const POKES: &str = "mm-pokes";

#[derive(Serialize, Deserialize)]
struct Poke {
    pool: String,
}

pub fn encode_poke(pool: &str) -> Vec<u8> {
    encode(&Poke {
        pool: pool.to_owned(),
    })
}

/// The pool of a poke (`None`: not a version-1 poke; pokes are wake-ups and may be dropped).
pub fn decode_poke(payload: &[u8]) -> Option<String> {
    decode::<Poke>(payload).ok().map(|p| p.pool)
}

/// The wake-up published on [`ticket_channel`].
pub const SIGNAL: &[u8] = br#"{"v":1}"#;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a matchmaking record: {0}")]
    Malformed(String),
    #[error("matchmaking schema version {0} is not supported (this reader knows 1)")]
    Version(u32),
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

#[derive(Serialize, Deserialize)]
struct Versioned<T> {
    v: u32,
    #[serde(flatten)]
    body: T,
}

fn encode<T: Serialize>(body: &T) -> Vec<u8> {
    serde_json::to_vec(&Versioned { v: VERSION, body }).unwrap_or_default()
}

fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, DecodeError> {
    let version: VersionOnly =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    if version.v != VERSION {
        return Err(DecodeError::Version(version.v));
    }
    let wire: Versioned<T> =
        serde_json::from_slice(payload).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    Ok(wire.body)
}

/// A pool's waiting seek as its schedule member: what the wave needs, with no other read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The ticket id.
    #[serde(rename = "t")]
    pub ticket: TicketId,
    #[serde(rename = "p")]
    pub player: PlayerId,
    /// Rating points in the pool's category.
    #[serde(rename = "r")]
    pub rating: i32,
    #[serde(rename = "pr", default)]
    pub provisional: bool,
    #[serde(rename = "g", default)]
    pub guest: bool,
    #[serde(rename = "ab", default)]
    pub aborter: bool,
    /// The opponent rating range the seeker accepts (inclusive).
    #[serde(rename = "rg", default, skip_serializing_if = "Option::is_none")]
    pub range: Option<(i32, i32)>,
    /// When the seek started, Unix ms (missed waves are counted from it).
    #[serde(rename = "at")]
    pub since_ms: u64,
}

pub fn encode_member(member: &Member) -> String {
    String::from_utf8(encode(member)).unwrap_or_default()
}

pub fn decode_member(text: &str) -> Result<Member, DecodeError> {
    decode(text.as_bytes())
}

/// A player as matchmaking shows them (from Auth's identities).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Who {
    pub id: PlayerId,
    pub name: String,
    #[serde(default)]
    pub guest: bool,
}

/// One pool seat of a ticket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seat {
    pub pool: String,
    /// The exact member text in `mm-pool:{pool}`.
    pub member: String,
    pub rating: i32,
}

/// Where a ticket stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TicketState {
    Waiting,
    /// Claimed by a wave (fencing `token` of `pool`'s lease) for a game with `partner`; finished by the
    /// wave or, after a crash, by whoever takes the [`Commit`] from `mm-commits`.
    Matching {
        pool: String,
        partner: TicketId,
        game_id: GameId,
        token: u64,
        at_ms: u64,
    },
    Paired {
        pool: String,
        game_id: GameId,
        /// `white` or `black`.
        color: String,
        opponent: Who,
        at_ms: u64,
    },
    /// `cancelled`, `in_game`, `expired`, `unknown_player`.
    Ended {
        reason: String,
        at_ms: u64,
    },
}

/// A quick-pairing seek.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    pub id: TicketId,
    pub player: Who,
    pub seats: Vec<Seat>,
    #[serde(default)]
    pub range: Option<(i32, i32)>,
    #[serde(default)]
    pub aborter: bool,
    pub created_ms: u64,
    /// The highest fencing token of each pool's lease that has written this ticket: a write under a
    /// lower token (a wave runner that lost its lease) is refused.
    #[serde(default)]
    pub fences: Vec<(String, u64)>,
    #[serde(flatten)]
    pub state: TicketState,
}

pub fn encode_ticket(ticket: &Ticket) -> Vec<u8> {
    encode(ticket)
}
pub fn decode_ticket(payload: &[u8]) -> Result<Ticket, DecodeError> {
    decode(payload)
}

/// The holder of a pool's waves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaveLease {
    pub owner: String,
    /// The lease lapses then, Unix ms (the key also expires).
    pub until_ms: u64,
}

pub fn encode_lease(lease: &WaveLease) -> Vec<u8> {
    encode(lease)
}
pub fn decode_lease(payload: &[u8]) -> Result<WaveLease, DecodeError> {
    decode(payload)
}

/// A claimed pairing (member of `mm-commits`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    pub pool: String,
    /// The two tickets: `white`'s first.
    pub white: TicketId,
    pub black: TicketId,
    pub game_id: GameId,
    pub token: u64,
}

pub fn encode_commit(commit: &Commit) -> String {
    String::from_utf8(encode(commit)).unwrap_or_default()
}
pub fn decode_commit(text: &str) -> Result<Commit, DecodeError> {
    decode(text.as_bytes())
}

/// A pool's numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStats {
    /// Exponentially weighted average wait of the pairings, ms (newest weighs 1/8).
    pub typical_wait_ms: u64,
    pub pairings: u64,
}

pub fn encode_stats(stats: &PoolStats) -> Vec<u8> {
    encode(stats)
}
pub fn decode_stats(payload: &[u8]) -> Result<PoolStats, DecodeError> {
    decode(payload)
}

/// A custom game listed in the lobby.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LobbySeek {
    /// Also the open invitation's id in Games.
    pub id: GameId,
    pub seeker: Who,
    /// Variant key and house-rule options text (`draughts_engine` syntax).
    pub variant: String,
    #[serde(default)]
    pub options: String,
    /// Fischer base and increment, ms; or correspondence days per move (then `base_ms` = 0).
    #[serde(default)]
    pub base_ms: u64,
    #[serde(default)]
    pub increment_ms: u64,
    #[serde(default)]
    pub days_per_move: u32,
    /// `white`, `black` or empty (random).
    #[serde(default)]
    pub color: String,
    pub rated: bool,
    #[serde(default)]
    pub range: Option<(i32, i32)>,
    pub rating: i32,
    pub created_ms: u64,
    pub expires_ms: u64,
    /// The key Games' invitation was created with: only Matchmaking.Accept (which checks the range
    /// and the guest rule first) presents it. Never shown to clients.
    #[serde(default)]
    pub accept_key: String,
    /// The client address (IPv6 by network) it was made from: the per-address bound. Never shown.
    #[serde(default)]
    pub address: String,
}

impl LobbySeek {
    /// A real-time seek lives while its owner does (a heartbeat); a correspondence one until it expires.
    pub fn real_time(&self) -> bool {
        self.days_per_move == 0
    }
}

pub fn encode_lobby_seek(seek: &LobbySeek) -> Vec<u8> {
    encode(seek)
}
pub fn decode_lobby_seek(payload: &[u8]) -> Result<LobbySeek, DecodeError> {
    decode(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_examples_decode() {
        let ticket = br#"{"v":1,"id":"t1","player":{"id":"guest:a","name":"Ann","guest":true},
            "seats":[{"pool":"english-3+2-casual","member":"{}","rating":1500}],"created_ms":5,
            "state":"paired","pool":"english-3+2-casual","game_id":"m1","color":"white",
            "opponent":{"id":"guest:b","name":"Bob"},"at_ms":9,"future_field":1}"#;
        let t = decode_ticket(ticket).unwrap();
        assert!(matches!(t.state, TicketState::Paired { ref color, .. } if color == "white"));
        assert_eq!(decode_ticket(&encode_ticket(&t)).unwrap(), t);
        let waiting = br#"{"v":1,"id":"t2","player":{"id":"player:x","name":"X"},"seats":[],"created_ms":1,"state":"waiting"}"#;
        assert_eq!(decode_ticket(waiting).unwrap().state, TicketState::Waiting);
        assert_eq!(
            decode_ticket(br#"{"v":2,"id":"t"}"#),
            Err(DecodeError::Version(2))
        );
        let commit = Commit {
            pool: "p".into(),
            white: "a".parse().unwrap(),
            black: "b".parse().unwrap(),
            game_id: "m1".parse().unwrap(),
            token: 4,
        };
        assert_eq!(decode_commit(&encode_commit(&commit)).unwrap(), commit);
        let lease = WaveLease {
            owner: "r1".into(),
            until_ms: 3,
        };
        assert_eq!(decode_lease(&encode_lease(&lease)).unwrap(), lease);
    }

    #[test]
    fn records_written_before_typed_ids_read_and_write_back_byte_for_byte() {
        // As the untyped contract wrote them.
        let before: [&[u8]; 2] = [
            br#"{"v":1,"id":"t1","player":{"id":"guest:a","name":"Ann","guest":true},"seats":[{"pool":"english-3+2-casual","member":"{}","rating":1500}],"range":null,"aborter":false,"created_ms":5,"fences":[["english-3+2-casual",3]],"state":"paired","pool":"english-3+2-casual","game_id":"m1","color":"white","opponent":{"id":"guest:b","name":"Bob","guest":false},"at_ms":9}"#,
            br#"{"v":1,"id":"t2","player":{"id":"player:x","name":"X","guest":false},"seats":[],"range":null,"aborter":false,"created_ms":1,"fences":[],"state":"matching","pool":"p","partner":"t3","game_id":"m2","token":4,"at_ms":2}"#,
        ];
        for ticket in before {
            assert_eq!(encode_ticket(&decode_ticket(ticket).unwrap()), ticket);
        }
        let commit = r#"{"v":1,"pool":"p","white":"t2","black":"t3","game_id":"m2","token":4}"#;
        assert_eq!(encode_commit(&decode_commit(commit).unwrap()), commit);
        // Ids are checked on read.
        let bad_player = br#"{"v":1,"id":"t2","player":{"id":"bob","name":"X"},"seats":[],"created_ms":1,"state":"waiting"}"#;
        assert!(decode_ticket(bad_player).is_err());
        let bad_game = r#"{"v":1,"pool":"p","white":"t2","black":"t3","game_id":"m 2","token":4}"#;
        assert!(decode_commit(bad_game).is_err());
        let bad_ticket =
            r#"{"v":1,"pool":"p","white":"t 2","black":"t3","game_id":"m2","token":4}"#;
        assert!(decode_commit(bad_ticket).is_err());
        let bad_partner = br#"{"v":1,"id":"t2","player":{"id":"player:x","name":"X"},"seats":[],"created_ms":1,"state":"matching","pool":"p","partner":"","game_id":"m2","token":4,"at_ms":2}"#;
        assert!(decode_ticket(bad_partner).is_err());
    }
}
