//! Every Redis key and channel name used by [`RedisStore`](crate::RedisStore), built in
//! one place.
//!
//! # Layout
//!
//! All names start with a configurable prefix (default [`DEFAULT_PREFIX`], `"draughts:"`),
//! so several deployments or test runs can share one server. After the prefix comes a
//! kind tag, then the caller's name unchanged. Because each kind has its own tag, the
//! namespaces cannot collide whatever the caller's names contain.
//!
//! | name | Redis type | contents |
//! |---|---|---|
//! | `{prefix}kv:{key}` | hash | field `value`: the payload bytes; field `version`: decimal version (1, 2, ...); optional TTL |
//! | `{prefix}lease:{key}` | string | the owner's name; TTL = the lease time |
//! | `{prefix}stream:{stream}` | stream | one field per entry, `p`: the payload bytes; consumer groups named by the caller |
//! | `{prefix}chan:{channel}` | pub/sub channel | message = the payload bytes |
//! | `{prefix}due:{set}` | sorted set | member = caller's member; score = due time in Unix milliseconds |
//! | `{prefix}rate:{key}` | string | decimal hit count of the current window; TTL = rest of the window |

/// The prefix used when none is configured.
pub const DEFAULT_PREFIX: &str = "draughts:";

/// The field of a stream entry that holds the payload.
pub const STREAM_PAYLOAD_FIELD: &str = "p";
/// The hash field of a versioned key that holds the value.
pub const KV_VALUE_FIELD: &str = "value";
/// The hash field of a versioned key that holds the version.
pub const KV_VERSION_FIELD: &str = "version";

/// Builds key names under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Names under `prefix` (for example `"draughts:"` or `"test-1234:"`).
    pub fn new(prefix: impl Into<String>) -> Self {
        Keys {
            prefix: prefix.into(),
        }
    }

    /// The prefix every name starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn name(&self, kind: &str, name: &str) -> String {
        let mut out = String::with_capacity(self.prefix.len() + kind.len() + 1 + name.len());
        out.push_str(&self.prefix);
        out.push_str(kind);
        out.push(':');
        out.push_str(name);
        out
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

    /// The pub/sub channel `channel`.
    pub fn channel(&self, channel: &str) -> String {
        self.name("chan", channel)
    }

    /// The sorted set of deadline schedule `set`.
    pub fn schedule(&self, set: &str) -> String {
        self.name("due", set)
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
        assert_eq!(keys.schedule("clocks"), "t:due:clocks");
        assert_eq!(keys.rate("ip"), "t:rate:ip");
        assert_eq!(keys.lease("pool"), "t:lease:pool");
    }
}
