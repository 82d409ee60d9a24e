//! The read path: ratings, leaderboards (keyset pages), history and predictions.

use draughts_store::sqlx::{self, AssertSqlSafe, Row};

use super::*;
use crate::glicko;

impl RatingsCore {
    async fn load_one(&self, player_id: &str, category: Category) -> RatingsResult<Option<Stored>> {
        let sql =
            format!("SELECT {ROW_COLUMNS} FROM ratings WHERE category = $1 AND player_id = $2");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(category.to_string())
            .bind(player_id.to_owned())
            .fetch_optional(self.db.pool())
            .await?;
        match row {
            Some(row) => Ok(Some(decode_row(&row)?.1)),
            None => Ok(None),
        }
    }

    /// A player's rating in a category (the starting rating if the player has none there).
    pub async fn rating(
        &self,
        player_id: &str,
        category: Category,
        now_ms: u64,
    ) -> RatingsResult<RatingView> {
        check_player(player_id)?;
        self.check_category(category)?;
        let row = self
            .load_one(player_id, category)
            .await?
            .unwrap_or_else(|| Stored::new(&self.settings.params));
        Ok(self.view(player_id, category, &row, ms_i64(now_ms)))
    }

    /// Every rating of a player with at least one rated game, by variant then speed class.
    pub async fn ratings(&self, player_id: &str, now_ms: u64) -> RatingsResult<Vec<RatingView>> {
        check_player(player_id)?;
        let sql = format!(
            "SELECT {ROW_COLUMNS}, category FROM ratings WHERE player_id = $1 AND games > 0"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(player_id.to_owned())
            .fetch_all(self.db.pool())
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let (player, decoded) = decode_row(row)?;
            let key: String = row.try_get(11)?;
            let category: Category = key
                .parse()
                .map_err(|e: crate::category::BadCategory| RatingsError::Corrupt(e.to_string()))?;
            out.push(self.view(&player, category, &decoded, ms_i64(now_ms)));
        }
        out.sort_by_key(|view| view.category);
        Ok(out)
    }

    /// The 1-based position of `view` on its category's leaderboard (the bots' for a bot's rating);
    /// `None` while it is provisional.
    pub async fn rank(&self, view: &RatingView, now_ms: u64) -> RatingsResult<Option<u64>> {
        if view.provisional {
            return Ok(None);
        }
        let above: i64 = sqlx::query(
            "SELECT COUNT(*) FROM ratings WHERE category = $1 AND bot = $5 AND established_until_ms > $2 \
             AND (rating > $3 OR (rating = $3 AND player_id < $4))",
        )
        .bind(view.category.to_string())
        .bind(ms_i64(now_ms))
        .bind(view.glicko.rating)
        .bind(view.player_id.clone())
        .bind(i64::from(view.bot))
        .fetch_one(self.db.pool())
        .await?
        .try_get(0)?;
        Ok(Some(ms_u64(above) + 1))
    }

    /// A player's `limit` most recent rating updates over every category, newest first.
    pub async fn recent_updates(
        &self,
        player_id: &str,
        limit: u32,
    ) -> RatingsResult<Vec<(Category, HistoryEntry)>> {
        check_player(player_id)?;
        let rows = sqlx::query(
            "SELECT games_total, at_ms, rating, deviation, volatility, rating_change, game_id, games, category \
             FROM rating_history WHERE player_id = $1 ORDER BY at_ms DESC, category LIMIT $2",
        )
        .bind(player_id.to_owned())
        .bind(i64::from(limit))
        .fetch_all(self.db.pool())
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let key: String = row.try_get(8)?;
            let category: Category = key
                .parse()
                .map_err(|e: crate::category::BadCategory| RatingsError::Corrupt(e.to_string()))?;
            out.push((
                category,
                HistoryEntry {
                    games_total: count_u32(row.try_get(0)?),
                    at_ms: ms_u64(row.try_get(1)?),
                    glicko: Glicko {
                        rating: row.try_get(2)?,
                        deviation: row.try_get(3)?,
                        volatility: row.try_get(4)?,
                    },
                    rating_change: row.try_get(5)?,
                    game_id: row.try_get(6)?,
                    games: count_u32(row.try_get(7)?),
                },
            ));
        }
        Ok(out)
    }

    /// A page of the leaderboard of `category`: established players, best first; ties by player id.
    /// People's (`bots` false) or BOTs' (`bots` true): the two never mix.
    pub async fn leaderboard(
        &self,
        category: Category,
        bots: bool,
        page_size_requested: u32,
        page_token: &str,
        now_ms: u64,
    ) -> RatingsResult<Page<(u64, RatingView)>> {
        self.check_category(category)?;
        let limit = page_size(page_size_requested)?;
        let key = category.to_string();
        let now = ms_i64(now_ms);
        // People's tokens keep the tag they had before bots' leaderboards existed.
        let tag = if bots { "B1" } else { "L1" };
        let after = if page_token.is_empty() {
            None
        } else {
            let text = decode_token(page_token)?;
            let bad = || RatingsError::InvalidArgument("bad page token".into());
            let mut parts = text.splitn(4, '|');
            let (Some(token_tag @ ("L1" | "B1")), Some(token_category), Some(bits), Some(player)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad());
            };
            if token_category != key || token_tag != tag {
                return Err(RatingsError::InvalidArgument(
                    "the page token belongs to another leaderboard".into(),
                ));
            }
            let bits = u64::from_str_radix(bits, 16).map_err(|_| bad())?;
            Some((f64::from_bits(bits), player.to_owned()))
        };
        let mut sql = format!(
            "SELECT {ROW_COLUMNS} FROM ratings WHERE category = $1 AND bot = $2 AND established_until_ms > $3"
        );
        if after.is_some() {
            sql.push_str(" AND (rating < $4 OR (rating = $4 AND player_id > $5))");
        }
        sql.push_str(&format!(
            " ORDER BY rating DESC, player_id ASC LIMIT {}",
            limit + 1
        ));
        let kind = i64::from(bots);
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .bind(key.clone())
            .bind(kind)
            .bind(now);
        if let Some((rating, player)) = &after {
            query = query.bind(*rating).bind(player.clone());
        }
        // The rows and the rank of the first one are read in one snapshot (SQLite: a read transaction
        // is one; PostgreSQL needs REPEATABLE READ for that, its default is per statement).
        let mut tx = self.db.pool().begin().await?;
        if self.db.backend() == draughts_store::DbBackend::Postgres {
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await?;
        }
        let rows = query.fetch_all(&mut *tx).await?;
        let mut decoded = Vec::with_capacity(rows.len());
        for row in &rows {
            decoded.push(decode_row(row)?);
        }
        let first_rank = match decoded.first() {
            None => 0,
            Some((player, row)) => {
                let above: i64 = sqlx::query(
                    "SELECT COUNT(*) FROM ratings WHERE category = $1 AND bot = $5 AND established_until_ms > $2 \
                     AND (rating > $3 OR (rating = $3 AND player_id < $4))",
                )
                .bind(key.clone())
                .bind(now)
                .bind(row.glicko.rating)
                .bind(player.clone())
                .bind(kind)
                .fetch_one(&mut *tx)
                .await?
                .try_get(0)?;
                ms_u64(above) + 1
            }
        };
        tx.commit().await?;
        let more = decoded.len() > limit;
        decoded.truncate(limit);
        let next_page_token = if more {
            decoded.last().map(|(player, row)| {
                encode_token(&format!(
                    "{tag}|{key}|{:016x}|{player}",
                    row.glicko.rating.to_bits()
                ))
            })
        } else {
            None
        };
        let entries = decoded
            .iter()
            .enumerate()
            .map(|(i, (player, row))| {
                (first_rank + i as u64, self.view(player, category, row, now))
            })
            .collect();
        Ok(Page {
            entries,
            next_page_token,
        })
    }

    /// A page of a player's rating history in a category, newest first.
    pub async fn history(
        &self,
        player_id: &str,
        category: Category,
        page_size_requested: u32,
        page_token: &str,
    ) -> RatingsResult<Page<HistoryEntry>> {
        check_player(player_id)?;
        self.check_category(category)?;
        let limit = page_size(page_size_requested)?;
        let key = category.to_string();
        let before = if page_token.is_empty() {
            None
        } else {
            let text = decode_token(page_token)?;
            let bad = || RatingsError::InvalidArgument("bad page token".into());
            let mut parts = text.splitn(4, '|');
            let (Some("H1"), Some(token_category), Some(games), Some(player)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad());
            };
            if token_category != key || player != player_id {
                return Err(RatingsError::InvalidArgument(
                    "the page token belongs to another history".into(),
                ));
            }
            Some(games.parse::<i64>().map_err(|_| bad())?)
        };
        let mut sql = "SELECT games_total, at_ms, rating, deviation, volatility, rating_change, game_id, games \
                       FROM rating_history WHERE category = $1 AND player_id = $2"
            .to_owned();
        if before.is_some() {
            sql.push_str(" AND games_total < $3");
        }
        sql.push_str(&format!(" ORDER BY games_total DESC LIMIT {}", limit + 1));
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .bind(key.clone())
            .bind(player_id.to_owned());
        if let Some(games) = before {
            query = query.bind(games);
        }
        let rows = query.fetch_all(self.db.pool()).await?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in &rows {
            entries.push(HistoryEntry {
                games_total: count_u32(row.try_get(0)?),
                at_ms: ms_u64(row.try_get(1)?),
                glicko: Glicko {
                    rating: row.try_get(2)?,
                    deviation: row.try_get(3)?,
                    volatility: row.try_get(4)?,
                },
                rating_change: row.try_get(5)?,
                game_id: row.try_get(6)?,
                games: count_u32(row.try_get(7)?),
            });
        }
        let more = entries.len() > limit;
        entries.truncate(limit);
        let next_page_token = if more {
            entries
                .last()
                .map(|e| encode_token(&format!("H1|{key}|{}|{player_id}", e.games_total)))
        } else {
            None
        };
        Ok(Page {
            entries,
            next_page_token,
        })
    }

    /// The expected score of `a` against `b` in `category`.
    pub async fn predict(
        &self,
        a: &str,
        b: &str,
        category: Category,
        now_ms: u64,
    ) -> RatingsResult<Prediction> {
        let a = self.rating(a, category, now_ms).await?;
        let b = self.rating(b, category, now_ms).await?;
        Ok(Prediction {
            expected_a: glicko::expected_score(a.glicko, b.glicko),
            a,
            b,
        })
    }
}
