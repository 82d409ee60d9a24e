//! The usual read of a consumer group's member: first the entries other members left pending for too
//! long (they died or hang), then new ones.

use std::time::Duration;

use crate::{Entry, LiveStore, StoreError};

/// Up to `max` entries for `consumer` of `group` on `stream`: entries pending with any member for at
/// least `min_idle` (taken over), then entries never delivered. Creates the group if needed. Does not
/// wait. The caller acknowledges each entry once it has dealt with it.
pub async fn take_batch(
    live: &dyn LiveStore,
    stream: &str,
    group: &str,
    consumer: &str,
    min_idle: Duration,
    max: usize,
) -> Result<Vec<Entry>, StoreError> {
    live.ensure_group(stream, group).await?;
    let mut entries = live
        .claim_idle(stream, group, consumer, min_idle, max)
        .await?;
    if entries.len() < max {
        entries.extend(
            live.read_group(stream, group, consumer, max - entries.len(), Duration::ZERO)
                .await?,
        );
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bytes, MemoryStore};

    #[tokio::test]
    async fn takes_over_stale_entries_then_new_ones() {
        let live = MemoryStore::new();
        live.append("s", Bytes::from_static(b"1")).await.unwrap();
        let first = take_batch(&live, "s", "g", "a", Duration::from_secs(60), 10)
            .await
            .unwrap();
        assert_eq!(first.len(), 1);
        live.append("s", Bytes::from_static(b"2")).await.unwrap();
        // "a" never acknowledged its entry; with no idle bound "b" takes it over, then the new one.
        let second = take_batch(&live, "s", "g", "b", Duration::ZERO, 10)
            .await
            .unwrap();
        let payloads: Vec<&[u8]> = second.iter().map(|e| e.payload.as_ref()).collect();
        assert_eq!(payloads, [b"1".as_ref(), b"2".as_ref()]);
    }
}
