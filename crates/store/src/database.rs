//! [`Database`]: durable records in PostgreSQL (deployments) or SQLite (embedded mode),
//! through one `sqlx::AnyPool`, with versioned migrations.
//!
//! # Portable SQL
//!
//! Queries are plain strings checked at run time (no compile-time macros, no
//! `DATABASE_URL` at build time). To run on both backends:
//! - write placeholders as `$1, $2, ...` (SQLite accepts them too);
//! - use `BIGINT`, `INTEGER`, `TEXT`, `BOOLEAN`, `DOUBLE PRECISION` column types, and bind
//!   or read only `i64`, `i32`, `f64`, `bool`, `String`, `Vec<u8>` (what `Any` supports);
//!   byte columns are `BYTEA` on PostgreSQL and `BLOB` on SQLite, so avoid them in shared
//!   migrations or keep one migration list per backend ([`Database::backend`]);
//! - store times as `BIGINT` Unix milliseconds;
//! - `INSERT ... ON CONFLICT (...) DO NOTHING / DO UPDATE` works on both.
//!
//! # Migrations
//!
//! [`Database::migrate`] applies each [`Migration`] not yet recorded in the
//! `schema_migrations` table, in version order, each in its own transaction together with
//! its record (`version BIGINT PRIMARY KEY, name TEXT, applied_at_ms BIGINT`). On
//! PostgreSQL a transaction-scoped advisory lock serialises replicas that start together.
//! A migration's SQL may hold several statements separated by `;`.

use std::fmt;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{Any, AnyPool, AssertSqlSafe, Row, Transaction};

use crate::error::StoreError;
use crate::live::now_unix_ms;

/// How long [`Database::connect`] waits for a connection.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// The advisory lock key taken while migrating on PostgreSQL ("draughts" in ASCII, roughly).
const MIGRATION_LOCK_KEY: i64 = 0x6472_6175_6768_7473;

/// Which engine a [`Database`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbBackend {
    /// PostgreSQL (`postgres://` or `postgresql://`).
    Postgres,
    /// SQLite (`sqlite:`), on a file or in memory.
    Sqlite,
}

/// One schema change. Versions are unique and applied in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration<'a> {
    /// Orders migrations; recorded in `schema_migrations.version`.
    pub version: i64,
    /// A short name, recorded and checked on later runs (a changed name is an error).
    pub name: &'a str,
    /// The SQL to run, possibly several statements.
    pub sql: &'a str,
}

/// A pool of connections to PostgreSQL or SQLite. Cheap to clone.
#[derive(Clone)]
pub struct Database {
    pool: AnyPool,
    backend: DbBackend,
}

impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Database")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

fn backend_of(url: &str) -> Result<DbBackend, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(DbBackend::Postgres)
    } else if url.starts_with("sqlite:") {
        Ok(DbBackend::Sqlite)
    } else {
        Err(StoreError::InvalidArgument(
            "database url must start with postgres://, postgresql:// or sqlite:".to_owned(),
        ))
    }
}

fn is_in_memory_sqlite(url: &str) -> bool {
    url.starts_with("sqlite::memory:")
        || url.starts_with("sqlite://:memory:")
        || url.contains("mode=memory")
}

impl Database {
    /// Connects with default pool sizes: 10 connections for PostgreSQL, 4 for an SQLite
    /// file, and exactly one (kept open forever) for in-memory SQLite, because every new
    /// connection to `sqlite::memory:` would see a new, empty database. Waits up to
    /// [`DEFAULT_ACQUIRE_TIMEOUT`] for the server (retrying refused connections).
    ///
    /// URLs: `postgres://user:password@host:port/db`, `sqlite://path/to/file.db?mode=rwc`
    /// (creates the file), `sqlite::memory:`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let max_connections = match backend_of(url)? {
            DbBackend::Postgres => 10,
            DbBackend::Sqlite => 4,
        };
        Database::connect_with(url, max_connections, DEFAULT_ACQUIRE_TIMEOUT).await
    }

    /// Like [`connect`](Database::connect) with an explicit pool size (ignored for
    /// in-memory SQLite, which always uses one connection) and the longest wait for a
    /// connection, at startup and for every query.
    pub async fn connect_with(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = backend_of(url)?;
        let options = if backend == DbBackend::Sqlite && is_in_memory_sqlite(url) {
            AnyPoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
        } else if backend == DbBackend::Sqlite {
            // A file: write-ahead logging, so readers never wait for the writer and a commit is an
            // append to the log, synced at checkpoints (`synchronous=NORMAL`: a power cut may lose the
            // last commits, never corrupt the file). Without it every commit synced the whole file and
            // concurrent writers queued behind each other up to the busy timeout (seen as multi-second
            // stalls when many games finished at once).
            AnyPoolOptions::new()
                .max_connections(max_connections.max(1))
                .after_connect(|conn, _meta| {
                    Box::pin(async move {
                        use sqlx::Executor;
                        conn.execute("PRAGMA journal_mode=WAL").await?;
                        conn.execute("PRAGMA synchronous=NORMAL").await?;
                        Ok(())
                    })
                })
        } else {
            AnyPoolOptions::new().max_connections(max_connections.max(1))
        };
        let pool = options
            .acquire_timeout(acquire_timeout)
            .connect(url)
            .await?;
        Ok(Database { pool, backend })
    }

    /// The pool, for queries: `sqlx::query("...").bind(..).execute(db.pool())`.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Which engine this is.
    pub fn backend(&self) -> DbBackend {
        self.backend
    }

    /// Starts a transaction; it rolls back when dropped without
    /// [`commit`](Transaction::commit).
    ///
    /// On SQLite it is `BEGIN IMMEDIATE`: it takes the write lock at once (waiting up to
    /// the busy timeout), so a transaction that reads and then writes cannot fail with
    /// "database is locked" half-way when another connection writes too.
    pub async fn begin(&self) -> Result<Transaction<'static, Any>, StoreError> {
        match self.backend {
            DbBackend::Postgres => Ok(self.pool.begin().await?),
            DbBackend::Sqlite => Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?),
        }
    }

    /// Closes every connection (waits for the ones in use).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Applies the migrations not applied yet, in version order, and returns the versions
    /// applied by this call (empty when the schema is up to date).
    ///
    /// Fails with InvalidArgument if two migrations share a version, and if
    /// a recorded version has a different name (the list was edited after deployment):
    /// [`StoreError::MigrationMismatch`].
    pub async fn migrate(&self, migrations: &[Migration<'_>]) -> Result<Vec<i64>, StoreError> {
        let mut ordered: Vec<&Migration<'_>> = migrations.iter().collect();
        ordered.sort_by_key(|migration| migration.version);
        if let Some(pair) = ordered
            .windows(2)
            .find(|pair| pair[0].version == pair[1].version)
        {
            return Err(StoreError::InvalidArgument(format!(
                "two migrations have version {}",
                pair[0].version
            )));
        }
        let mut applied = Vec::new();
        for migration in ordered {
            if self.apply_one(migration).await? {
                applied.push(migration.version);
            }
        }
        Ok(applied)
    }

    /// The recorded migrations, as (version, name), in version order.
    pub async fn applied_migrations(&self) -> Result<Vec<(i64, String)>, StoreError> {
        let mut tx = self.begin().await?;
        self.prepare_migration_table(&mut tx).await?;
        let rows = sqlx::query("SELECT version, name FROM schema_migrations ORDER BY version")
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|row| Ok((row.try_get::<i64, _>(0)?, row.try_get::<String, _>(1)?)))
            .collect()
    }

    /// Takes the migration lock (PostgreSQL) and creates `schema_migrations` if needed.
    async fn prepare_migration_table(
        &self,
        tx: &mut Transaction<'static, Any>,
    ) -> Result<(), StoreError> {
        if self.backend == DbBackend::Postgres {
            // The void result is wrapped so the Any driver has a type it can decode.
            sqlx::query("SELECT 1 FROM (SELECT pg_advisory_xact_lock($1)) AS migration_lock")
                .bind(MIGRATION_LOCK_KEY)
                .execute(&mut **tx)
                .await?;
        }
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS schema_migrations (\
             version BIGINT PRIMARY KEY, \
             name TEXT NOT NULL, \
             applied_at_ms BIGINT NOT NULL)",
        )
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Applies one migration in its own transaction; returns whether it was applied now.
    async fn apply_one(&self, migration: &Migration<'_>) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        self.prepare_migration_table(&mut tx).await?;
        let recorded = sqlx::query("SELECT name FROM schema_migrations WHERE version = $1")
            .bind(migration.version)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(row) = recorded {
            let name: String = row.try_get(0)?;
            tx.commit().await?;
            if name != migration.name {
                return Err(StoreError::MigrationMismatch {
                    version: migration.version,
                    recorded: name,
                    given: migration.name.to_owned(),
                });
            }
            return Ok(false);
        }
        sqlx::raw_sql(AssertSqlSafe(migration.sql.to_owned()))
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)",
        )
        .bind(migration.version)
        .bind(migration.name.to_owned())
        .bind(i64::try_from(now_unix_ms()).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        tracing::info!(
            version = migration.version,
            name = migration.name,
            "migration applied"
        );
        Ok(true)
    }
}
