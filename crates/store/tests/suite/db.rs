//! The database checks and their runs on SQLite (memory and file) and PostgreSQL.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use draughts_store::Database;
use draughts_testkit::PostgresServer;

type CheckFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
type Check = fn(Database) -> CheckFuture;

/// Every database check, by name. Each runs on a fresh, empty database.
const CHECKS: &[(&str, Check)] = &[
    ("migrations_apply_once", |db| {
        Box::pin(checks::migrations_apply_once(db))
    }),
    ("concurrent_migrations_apply_once", |db| {
        Box::pin(checks::concurrent_migrations_apply_once(db))
    }),
    ("transaction_commits_two_rows_atomically", |db| {
        Box::pin(checks::transaction_commits_two_rows_atomically(db))
    }),
    ("unique_violation_is_conflict", |db| {
        Box::pin(checks::unique_violation_is_conflict(db))
    }),
];

async fn run_all<F, Fut>(backend: &str, mut fresh_database: F)
where
    F: FnMut(&'static str) -> Fut,
    Fut: Future<Output = Database>,
{
    for (name, check) in CHECKS {
        let started = Instant::now();
        let db = fresh_database(name).await;
        check(db.clone()).await;
        db.close().await;
        eprintln!("{backend}::{name} ok in {:?}", started.elapsed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_memory() {
    run_all("sqlite_memory", |_| async {
        Database::connect("sqlite::memory:")
            .await
            .expect("open in-memory sqlite")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_file() {
    let tmp = tempfile::Builder::new()
        .prefix("draughts-store-sqlite-")
        .tempdir()
        .unwrap();
    let dir_for_checks = tmp.path().to_path_buf();
    run_all("sqlite_file", move |name| {
        let path = dir_for_checks.join(format!("{name}.db"));
        async move {
            Database::connect(&format!("sqlite://{}?mode=rwc", path.display()))
                .await
                .expect("open sqlite file")
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres() {
    let started = Instant::now();
    let server = PostgresServer::start().expect("start a test PostgreSQL");
    eprintln!("postgres started in {:?}", started.elapsed());
    run_all("postgres", |name| {
        let url = server.create_database(name).expect("createdb");
        async move { Database::connect(&url).await.expect("connect to postgres") }
    })
    .await;
}

/// A bad URL is an InvalidArgument; a server that is not there is Unavailable.
#[tokio::test]
async fn connect_errors_have_codes() {
    use draughts_store::ErrorCode;
    let bad = Database::connect("mysql://x").await.unwrap_err();
    assert_eq!(bad.code(), ErrorCode::InvalidArgument);
    let port = draughts_testkit::free_port().unwrap();
    let down = Database::connect_with(
        &format!("postgres://postgres@127.0.0.1:{port}/x"),
        1,
        std::time::Duration::from_millis(500),
    )
    .await
    .unwrap_err();
    assert_eq!(down.code(), ErrorCode::Unavailable, "{down}");
}

mod checks {
    use draughts_store::sqlx::{self, Row};
    use draughts_store::{Database, ErrorCode, Migration, StoreError};

    /// The example schema of the suite (not part of the crate): finished games.
    const MIGRATIONS: &[Migration<'static>] = &[
        Migration {
            version: 1,
            name: "finished_games",
            sql: "CREATE TABLE finished_games (\
                    id BIGINT PRIMARY KEY, \
                    variant TEXT NOT NULL, \
                    result TEXT NOT NULL, \
                    plies INTEGER NOT NULL); \
                  CREATE INDEX finished_games_by_variant ON finished_games (variant);",
        },
        Migration {
            version: 2,
            name: "finished_games_rated",
            sql: "ALTER TABLE finished_games ADD COLUMN rated BOOLEAN NOT NULL DEFAULT FALSE",
        },
    ];

    const THIRD: Migration<'static> = Migration {
        version: 3,
        name: "players",
        sql: "CREATE TABLE players (name TEXT PRIMARY KEY, rating DOUBLE PRECISION NOT NULL)",
    };

    async fn count_games(db: &Database) -> i64 {
        sqlx::query("SELECT COUNT(*) FROM finished_games")
            .fetch_one(db.pool())
            .await
            .unwrap()
            .try_get::<i64, _>(0)
            .unwrap()
    }

    async fn insert_game(
        executor: impl sqlx::Executor<'_, Database = sqlx::Any>,
        id: i64,
        result: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO finished_games (id, variant, result, plies) VALUES ($1, $2, $3, $4)",
        )
        .bind(id)
        .bind("international".to_owned())
        .bind(result.to_owned())
        .bind(83_i32)
        .execute(executor)
        .await?;
        Ok(())
    }

    pub async fn migrations_apply_once(db: Database) {
        assert!(db.applied_migrations().await.unwrap().is_empty());
        assert_eq!(db.migrate(MIGRATIONS).await.unwrap(), vec![1, 2]);
        assert_eq!(
            db.migrate(MIGRATIONS).await.unwrap(),
            Vec::<i64>::new(),
            "re-running applies nothing"
        );
        // Given out of order, a new migration is applied after the recorded ones.
        let mut extended = vec![THIRD];
        extended.extend_from_slice(MIGRATIONS);
        assert_eq!(db.migrate(&extended).await.unwrap(), vec![3]);
        assert_eq!(
            db.applied_migrations().await.unwrap(),
            vec![
                (1, "finished_games".to_owned()),
                (2, "finished_games_rated".to_owned()),
                (3, "players".to_owned()),
            ]
        );
        // The tables exist and work.
        insert_game(db.pool(), 1, "2-0").await.unwrap();
        assert_eq!(count_games(&db).await, 1);

        // A renamed migration is refused; so are duplicate versions.
        let renamed = [Migration {
            version: 1,
            name: "renamed",
            sql: "SELECT 1",
        }];
        match db.migrate(&renamed).await {
            Err(StoreError::MigrationMismatch {
                version, recorded, ..
            }) => {
                assert_eq!(version, 1);
                assert_eq!(recorded, "finished_games");
            }
            other => panic!("expected a mismatch, got {other:?}"),
        }
        let duplicated = [THIRD, THIRD];
        assert_eq!(
            db.migrate(&duplicated).await.unwrap_err().code(),
            ErrorCode::InvalidArgument
        );

        // A failing migration leaves no trace: neither its table nor its record.
        let broken = [Migration {
            version: 4,
            name: "broken",
            sql: "CREATE TABLE half_done (id BIGINT PRIMARY KEY); SELECT * FROM no_such_table",
        }];
        assert!(db.migrate(&broken).await.is_err());
        assert_eq!(db.applied_migrations().await.unwrap().len(), 3);
        let fixed = [Migration {
            version: 4,
            name: "broken",
            sql: "CREATE TABLE half_done (id BIGINT PRIMARY KEY)",
        }];
        assert_eq!(db.migrate(&fixed).await.unwrap(), vec![4]);
    }

    pub async fn concurrent_migrations_apply_once(db: Database) {
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                db.migrate(MIGRATIONS).await.unwrap()
            }));
        }
        let mut applied = Vec::new();
        for task in tasks {
            applied.extend(task.await.unwrap());
        }
        applied.sort_unstable();
        assert_eq!(applied, vec![1, 2], "each migration applied by one caller");
        assert_eq!(db.applied_migrations().await.unwrap().len(), 2);
    }

    pub async fn transaction_commits_two_rows_atomically(db: Database) {
        db.migrate(MIGRATIONS).await.unwrap();
        let mut tx = db.begin().await.unwrap();
        insert_game(&mut *tx, 10, "1-1").await.unwrap();
        insert_game(&mut *tx, 11, "0-2").await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(count_games(&db).await, 2);

        // The second insert fails (duplicate id): the first is not kept either.
        let mut tx = db.begin().await.unwrap();
        insert_game(&mut *tx, 12, "2-0").await.unwrap();
        let duplicate = insert_game(&mut *tx, 10, "2-0").await.unwrap_err();
        assert_eq!(duplicate.code(), ErrorCode::Conflict);
        drop(tx);
        assert_eq!(count_games(&db).await, 2);

        // An explicit rollback discards both rows.
        let mut tx = db.begin().await.unwrap();
        insert_game(&mut *tx, 13, "2-0").await.unwrap();
        insert_game(&mut *tx, 14, "2-0").await.unwrap();
        tx.rollback().await.unwrap();
        assert_eq!(count_games(&db).await, 2);

        let rows = sqlx::query("SELECT id, result FROM finished_games ORDER BY id")
            .fetch_all(db.pool())
            .await
            .unwrap();
        let games: Vec<(i64, String)> = rows
            .iter()
            .map(|row| (row.try_get(0).unwrap(), row.try_get(1).unwrap()))
            .collect();
        assert_eq!(games, vec![(10, "1-1".to_owned()), (11, "0-2".to_owned())]);
    }

    pub async fn unique_violation_is_conflict(db: Database) {
        db.migrate(MIGRATIONS).await.unwrap();
        insert_game(db.pool(), 1, "2-0").await.unwrap();
        let err = insert_game(db.pool(), 1, "0-2").await.unwrap_err();
        assert_eq!(err.code(), ErrorCode::Conflict, "{err}");
        // Idempotent writes use ON CONFLICT, portable to both backends.
        sqlx::query(
            "INSERT INTO finished_games (id, variant, result, plies) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(1_i64)
        .bind("international".to_owned())
        .bind("0-2".to_owned())
        .bind(1_i32)
        .execute(db.pool())
        .await
        .unwrap();
        assert_eq!(count_games(&db).await, 1);
        let missing = sqlx::query("SELECT id FROM finished_games WHERE id = $1")
            .bind(999_i64)
            .fetch_one(db.pool())
            .await
            .map(|_| ())
            .map_err(StoreError::from)
            .unwrap_err();
        assert_eq!(missing.code(), ErrorCode::NotFound);
    }
}
