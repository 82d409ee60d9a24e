//! Every Redis key and channel name used by [`RedisStore`](crate::RedisStore), built in
//! one place.
//!
//! # Layout
//!
//! All names start with a configurable prefix (default [`DEFAULT_PREFIX`], `"draughts:"`),
//! so several deployments or test runs can share one server. After the prefix comes a
//! kind tag, then the caller's name unchanged. Because each kind has its own tag, the
//! namespaces cannot collide whatever the caller's names contain. (In these docs `<x>` stands for a
//! value; braces are literal: a Redis hash tag.)
//!
//! | name | Redis type | contents |
//! |---|---|---|
//! | `<prefix>kv:<key>` | hash | field `value`: the payload bytes; field `version`: decimal version (1, 2, ...); optional TTL |
//! | `<prefix>lease:<key>` | string | the owner's name; TTL = the lease time |
//! | `<prefix>stream:<stream>` | stream | one field per entry, `p`: the payload bytes; consumer groups named by the caller |
//! | `<prefix>chan:<channel>` | pub/sub channel | message = the payload bytes |
//! | `<prefix>due:<set>` | sorted set | member = caller's member; score = due time in Unix milliseconds |
//! | `<prefix>rate:<key>` | string | decimal hit count of the current window; TTL = rest of the window |
//!
//! # Groups and Redis Cluster
//!
//! Every caller's name belongs to a *group*: the text between its first `{` and the next `}` when
//! that text is not empty (a Redis hash tag), else the whole name. `game:{g7}` and `g7` are both in
//! group `g7`; `mm-ticket:{mm}t1` is in group `mm`; `game-deadlines` is its own group. Names of one
//! group are always stored together, so an operation over several of them is atomic on one server
//! and on a cluster alike:
//!
//! - on one server ([`Keys::new`]) the layout is the table above, unchanged;
//! - on a Redis Cluster ([`Keys::clustered`]) every group is mapped to one of [`CLUSTER_BUCKETS`]
//!   buckets (CRC16 of the group, as Redis hashes, modulo the bucket count) and every name is
//!   stored as `<prefix>{<b>}<kind>:<name>` where `<b>` is the bucket's tag: a short string whose hash
//!   slot lies in the bucket's share of the 16384 slots ([`bucket_tag`]), so the buckets spread
//!   evenly over the primaries that `redis-cli --cluster create` gives contiguous slot ranges.
//!
//! Schedules come in two kinds ([`Keys::schedule_keys`]):
//! - *pinned*: the set's name has a hash tag (`mm-pool:{mm}blitz`). One sorted set in the set's
//!   group; reading the whole set is one command. Its members may be any text.
//! - *spread*: the set's name has none (`game-deadlines`). On a cluster it is one sorted set per
//!   bucket, `<prefix>{<b>}due:<set>`, and each member lives in the shard of the member's own group
//!   (`g7` in bucket(`g7`)), so the schedule of game `g7` sits in the slot of `game:{g7}` and
//!   `put_with` can move both atomically; reads of the whole set visit every shard. On one server
//!   it is one sorted set.
//!
//! An [`Effect`](crate::Effect) of `put_with` on a schedule must be in the key's group: the set's
//! group for a pinned set, the member's group for a spread one ([`effect_group`]). Every backend
//! refuses other effects with `InvalidArgument`, so code that runs on the memory store or on one
//! Redis also runs on a cluster. Pub/sub channels are not keys (a cluster delivers every
//! publication to every node) and are free.

/// The prefix used when none is configured.
pub const DEFAULT_PREFIX: &str = "draughts:";

/// The field of a stream entry that holds the payload.
pub const STREAM_PAYLOAD_FIELD: &str = "p";
/// The hash field of a versioned key that holds the value.
pub const KV_VALUE_FIELD: &str = "value";
/// The hash field of a versioned key that holds the version.
pub const KV_VERSION_FIELD: &str = "version";

/// How many buckets the groups of a clustered store are mapped to: the most primaries a cluster can
/// spread the platform's keys over, and the number of shards of a spread schedule. Part of the
/// stored layout: changing it moves every key (a migration, not a setting).
pub const CLUSTER_BUCKETS: usize = 16;

/// The number of hash slots of a Redis Cluster.
pub const HASH_SLOTS: u16 = 16384;

/// The group of a caller's name (see the module documentation): the content of its first hash tag,
/// else the whole name.
pub fn group(name: &str) -> &str {
    hash_tag(name).unwrap_or(name)
}

/// The content of the first `{...}` of `name`, if it is not empty (Redis's hash tag rule).
pub fn hash_tag(name: &str) -> Option<&str> {
    let open = name.find('{')?;
    let rest = &name[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
}

/// The CRC16 (XMODEM) Redis Cluster hashes keys with.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot of a full Redis key, as Redis Cluster computes it.
pub fn hash_slot(key: &str) -> u16 {
    crc16(group(key).as_bytes()) % HASH_SLOTS
}

/// The bucket of a group among `n_buckets`.
pub fn bucket_of(group: &str, n_buckets: usize) -> usize {
    usize::from(crc16(group.as_bytes())) % n_buckets.max(1)
}

/// The tag of bucket `bucket` of `n_buckets`: the first string `"{bucket}.{n}"` (n = 0, 1, ...)
/// whose hash slot lies in the bucket's equal share of the slots, so that consecutive buckets
/// follow the slot order.
pub fn bucket_tag(bucket: usize, n_buckets: usize) -> String {
    let n_buckets = n_buckets.max(1);
    let share = |slot: u16| usize::from(slot) * n_buckets / usize::from(HASH_SLOTS);
    (0u64..)
        .map(|n| format!("{bucket}.{n}"))
        .find(|tag| share(crc16(tag.as_bytes()) % HASH_SLOTS) == bucket)
        .unwrap_or_default()
}

/// The group an [`Effect`](crate::Effect) on schedule `set` for `member` must share with the key
/// it is written with: the set's tag for a pinned set, else the member's group.
pub fn effect_group<'a>(set: &'a str, member: &'a str) -> &'a str {
    hash_tag(set).unwrap_or_else(|| group(member))
}

/// Builds key names under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
    /// On a cluster: the tag of each bucket (see the module documentation); empty on one server.
    buckets: Vec<String>,
}

impl Keys {
    /// Names under `prefix` (for example `"draughts:"` or `"test-1234:"`), for one server.
    pub fn new(prefix: impl Into<String>) -> Self {
        Keys {
            prefix: prefix.into(),
            buckets: Vec::new(),
        }
    }

    /// Names under `prefix` for a Redis Cluster: every group in one of [`CLUSTER_BUCKETS`] slots.
    /// The prefix must not contain `{` or `}` (the bucket's tag must be the key's first tag).
    pub fn clustered(prefix: impl Into<String>) -> Result<Self, String> {
        let prefix = prefix.into();
        if prefix.contains(['{', '}']) {
            return Err(format!(
                "a key prefix for a Redis Cluster must not contain braces: {prefix:?}"
            ));
        }
        Ok(Keys {
            prefix,
            buckets: (0..CLUSTER_BUCKETS)
                .map(|bucket| bucket_tag(bucket, CLUSTER_BUCKETS))
                .collect(),
        })
    }

    /// The prefix every name starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether names are laid out for a cluster.
    pub fn is_clustered(&self) -> bool {
        !self.buckets.is_empty()
    }

    fn build(&self, bucket: Option<&str>, kind: &str, name: &str) -> String {
        let mut out = String::with_capacity(self.prefix.len() + 24 + kind.len() + name.len());
        out.push_str(&self.prefix);
        if let Some(tag) = bucket {
            out.push('{');
            out.push_str(tag);
            out.push('}');
        }
        out.push_str(kind);
        out.push(':');
        out.push_str(name);
        out
    }

    /// The bucket tag of `group` (None on one server).
    fn tag_of(&self, group: &str) -> Option<&str> {
        if self.buckets.is_empty() {
            return None;
        }
        Some(&self.buckets[bucket_of(group, self.buckets.len())])
    }

    fn name(&self, kind: &str, name: &str) -> String {
        self.build(self.tag_of(group(name)), kind, name)
    }

    /// The hash holding versioned key `key`.
    pub fn kv(&self, key: &str) -> String {
        self.name("kv", key)
    }

    /// The string holding the owner of lease `key`.
    pub fn lease(&self, key: &str) -> String {
        self.name("lease", key)
    }

    /// The Redis stream `stream`.
    pub fn stream(&self, stream: &str) -> String {
        self.name("stream", stream)
    }

    /// The pub/sub channel `channel` (not a key: no bucket).
    pub fn channel(&self, channel: &str) -> String {
        self.build(None, "chan", channel)
    }

    /// The sorted set that holds (or would hold) `member` of schedule `set`: the set's one sorted
    /// set when it is pinned or on one server, else the shard of the member's group.
    pub fn schedule(&self, set: &str, member: &str) -> String {
        self.build(self.tag_of(effect_group(set, member)), "due", set)
    }

    /// Every sorted set of schedule `set`: one, or one per bucket for a spread set on a cluster.
    pub fn schedule_keys(&self, set: &str) -> Vec<String> {
        match hash_tag(set) {
            _ if self.buckets.is_empty() => vec![self.build(None, "due", set)],
            Some(tag) => vec![self.build(self.tag_of(tag), "due", set)],
            None => self
                .buckets
                .iter()
                .map(|tag| self.build(Some(tag), "due", set))
                .collect(),
        }
    }

    /// The counter of rate limit `key`.
    pub fn rate(&self, key: &str) -> String {
        self.name("rate", key)
    }
}

impl Default for Keys {
    fn default() -> Self {
        Keys::new(DEFAULT_PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_do_not_collide() {
        let keys = Keys::new("t:");
        assert_eq!(keys.kv("game:1"), "t:kv:game:1");
        assert_eq!(keys.stream("game:1"), "t:stream:game:1");
        assert_ne!(keys.kv("stream:x"), keys.stream("x"));
        assert_eq!(keys.channel("c"), "t:chan:c");
        assert_eq!(keys.schedule("clocks", "g1"), "t:due:clocks");
        assert_eq!(keys.schedule_keys("clocks"), ["t:due:clocks"]);
        assert_eq!(keys.rate("ip"), "t:rate:ip");
        assert_eq!(keys.lease("pool"), "t:lease:pool");
    }

    #[test]
    fn groups_follow_the_hash_tag_rule() {
        for (name, expected) in [
            ("game:{g7}", "g7"),
            ("g7", "g7"),
            ("{g7}:old", "g7"),
            ("mm-ticket:{mm}t1", "mm"),
            ("a{}b{c}", "a{}b{c}"),
            ("open{only", "open{only"),
            ("two{x}{y}", "x"),
            ("game-deadlines", "game-deadlines"),
        ] {
            assert_eq!(group(name), expected, "{name}");
        }
        assert_eq!(effect_group("game-deadlines", "g7"), "g7");
        assert_eq!(effect_group("mm-pool:{mm}blitz", "{\"t\":1}"), "mm");
    }

    #[test]
    fn crc16_and_slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(hash_slot("foo"), 12182);
        assert_eq!(hash_slot("{user1000}.following"), hash_slot("user1000"));
    }

    #[test]
    fn clustered_names_of_one_group_share_a_slot() {
        let keys = Keys::clustered("t:").unwrap();
        let game = keys.kv("game:{g7}");
        assert!(
            game.starts_with("t:{") && game.ends_with("}kv:game:{g7}"),
            "{game}"
        );
        let slot = hash_slot(&game);
        assert_eq!(hash_slot(&keys.schedule("game-deadlines", "g7")), slot);
        assert_eq!(hash_slot(&keys.stream("moves:{g7}")), slot);
        assert_eq!(hash_slot(&keys.lease("{g7}")), slot);
        // A pinned set is in its own group's slot whatever the member.
        let ticket = keys.kv("mm-ticket:{mm}t1");
        assert_eq!(
            hash_slot(&keys.schedule("mm-pool:{mm}blitz", "anything")),
            hash_slot(&ticket)
        );
        assert_eq!(keys.schedule_keys("mm-pool:{mm}blitz").len(), 1);
        assert_eq!(keys.schedule_keys("game-deadlines").len(), CLUSTER_BUCKETS);
        assert!(Keys::clustered("bad{").is_err());
    }

    /// The clustered layout is stored data: these names (the ones KEDA's `redis-cluster-streams`
    /// trigger is given in `deploy/`) change only with a migration.
    #[test]
    fn the_clustered_layout_is_stable() {
        let keys = Keys::clustered(DEFAULT_PREFIX).unwrap();
        // The analysis classes share the tag `{jobs}`: one slot, so one read can wait on all.
        assert_eq!(
            keys.stream("analysis.{jobs}.computer"),
            "draughts:{15.20}stream:analysis.{jobs}.computer"
        );
        assert_eq!(
            keys.stream("analysis.{jobs}.interactive"),
            "draughts:{15.20}stream:analysis.{jobs}.interactive"
        );
        assert_eq!(
            keys.stream("analysis.{jobs}.bulk"),
            "draughts:{15.20}stream:analysis.{jobs}.bulk"
        );
        assert_eq!(
            keys.stream("games.finished"),
            "draughts:{0.13}stream:games.finished"
        );
        assert_eq!(hash_slot("draughts:{6.43}stream:x"), 6614);
    }

    #[test]
    fn bucket_tags_spread_over_the_slot_range() {
        let keys = Keys::clustered("t:").unwrap();
        let slots: Vec<u16> = keys
            .schedule_keys("s")
            .iter()
            .map(|key| hash_slot(key))
            .collect();
        let share = usize::from(HASH_SLOTS) / CLUSTER_BUCKETS;
        for (bucket, slot) in slots.iter().enumerate() {
            assert_eq!(usize::from(*slot) / share, bucket, "{slots:?}");
        }
    }
}
