//! A guest taken over by an account (`Auth.LinkGuest`, stream `players.linked`): its ratings move to
//! the account ([`RatingsCore::merge_guest`]). Consumer group `ratings-links`, polled by the ratings
//! consumer loop; entries are acknowledged after the merge commits, and merging is idempotent.

use std::time::Duration;

use draughts_proto::contract::linked;
use draughts_store::LiveStore;

use crate::domain::RatingsCore;
use crate::error::RatingsResult;

/// The consumer group of ratings on `players.linked`.
pub const GROUP: &str = "ratings-links";

/// Entries pending this long with a member are taken over by another.
const TAKE_OVER_AFTER: Duration = Duration::from_secs(30);

/// Deals with the links waiting on the stream; returns how many were merged.
pub async fn apply(
    live: &dyn LiveStore,
    core: &RatingsCore,
    consumer: &str,
) -> RatingsResult<usize> {
    let entries =
        draughts_store::take_batch(live, linked::STREAM, GROUP, consumer, TAKE_OVER_AFTER, 50)
            .await?;
    let mut merged = 0;
    for entry in entries {
        match linked::decode(&entry.payload) {
            Ok(link) => {
                let categories = core
                    .merge_guest(link.guest_id.as_str(), link.player_id.as_str())
                    .await?;
                tracing::info!(guest_id = %link.guest_id, player_id = %link.player_id, ?categories, "guest ratings merged");
                merged += 1;
            }
            Err(e) => tracing::warn!(id = %entry.id, error = %e, "players.linked entry ignored"),
        }
        live.ack(linked::STREAM, GROUP, &[entry.id]).await?;
    }
    Ok(merged)
}
