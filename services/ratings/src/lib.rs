//! The ratings service: `draughts.v1.Ratings`. Glicko-2 ratings per player and category (a variant, and
//! per speed class for the variants configured so: international by default), computed from the
//! finished games the games service publishes on the `games.finished` stream, applied exactly once per
//! game id; leaderboards of established players with stable keyset paging (people's and BOTs' apart); rating history;
//! predictions; and an admin import.
//!
//! Layout:
//! - [`glicko`]: Glicko-2 as Glickman defines it, a pure leaf module;
//! - [`category`], [`event`]: rating categories and speed classes; the finished-game event (schema v1);
//! - [`domain`]: [`RatingsCore`], the domain over the database (no tonic types): the write path
//!   (applying batches atomically and idempotently, fixed rating periods) and the read path;
//! - [`consumer`]: the stream loop (consumer group, batches, takeover of a dead consumer's entries,
//!   acknowledgement after the commit), which also runs the reconciler;
//! - [`reconcile`]: finished games that the stream did not deliver, found in what the games service
//!   publishes (`Games.ListFinishedGames`, [`games_feed`]), rated through the same idempotent apply;
//! - [`grpc`]: the edge (converts only);
//! - [`config`]: [`RatingsConfig`], the rating system's parameters and policies.
//!
//! `main.rs` parses [`Config`] and calls [`run`]; the one-process platform builds [`Ratings`] on its
//! shared backends, calls [`Ratings::register`] and runs [`Ratings::run_consumer`] in the background.
//!
//! ```
//! use draughts_ratings::{Ratings, RatingsConfig};
//! use draughts_ratings::event::{FinishedGame, Outcome, Player, Source};
//! use draughts_ratings::category::Category;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let live = draughts_store::open_live_store("memory://", "").await?;
//! let db = draughts_store::Database::connect("sqlite::memory:").await?;
//! let ratings = Ratings::new(live, db, &RatingsConfig::defaults()).await?;
//! let side = |id: &str| Player::new(id.parse().unwrap());
//! let game = FinishedGame {
//!     game_id: "g1".into(), variant: draughts_engine::Variant::English, options: String::new(),
//!     rated: true, white: side("player:ann"), black: side("player:bob"),
//!     outcome: Outcome::WhiteWins, time_control: None, finished_at_ms: 1_000, traceparent: None,
//! };
//! let report = ratings.core.apply(&[game.clone(), game], Source::Import, 2_000).await?;
//! assert_eq!((report.recorded, report.duplicates), (1, 1));
//! let english = Category { variant: draughts_engine::Variant::English, speed: None };
//! let ann = ratings.core.rating("player:ann", english, 2_000).await?;
//! assert!(ann.glicko.rating > 1500.0 && ann.games == 1 && ann.provisional);
//! # Ok(())
//! # }
//! ```

pub mod category;
pub mod config;
pub mod consumer;
pub mod domain;
pub mod error;
pub mod event;
pub mod games_feed;
pub mod glicko;
pub mod grpc;
pub mod links;
pub mod reconcile;

use std::future::Future;
use std::sync::Arc;

use draughts_auth::{AuthConfig, AuthLayer, Authenticator, CallPolicy};
use draughts_proto::pb::ratings_server::RatingsServer;
use draughts_runtime::{BackendConfig, ConfigError, ServerConfig, Services, TelemetryConfig};
use draughts_store::{Database, LiveStore};
use tokio::net::TcpListener;

pub use config::{BotPolicy, ComputerPolicy, PeriodMode, Policy, RatingsConfig};
pub use consumer::Consumer;
pub use domain::RatingsCore;
pub use error::RatingsError;

/// The methods of `draughts.v1.Ratings` that only read: they go on, through each replica's fallback
/// limiter, while the rate counters are unreachable; `RecordResult` is refused then (see
/// `draughts_auth::limits`).
pub const RATINGS_READS: CallPolicy = CallPolicy::reads(&[
    "GetRating",
    "GetRatings",
    "Leaderboard",
    "RatingHistory",
    "PredictResult",
    "GetProfile",
]);

/// Configuration of the ratings service binary.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "draughts-ratings",
    version,
    about = "Glicko-2 ratings, leaderboards and rating history (draughts.v1.Ratings) from the finished-games stream"
)]
pub struct Config {
    #[command(flatten)]
    pub server: ServerConfig,
    #[command(flatten)]
    pub telemetry: TelemetryConfig,
    #[command(flatten)]
    pub backends: BackendConfig,
    #[command(flatten)]
    pub auth: AuthConfig,
    #[command(flatten)]
    pub ratings: RatingsConfig,
    #[command(flatten)]
    pub games: GamesFeedConfig,
}

/// Where the reconciler reads the finished games the games service publishes
/// (`Games.ListFinishedGames`; see [`reconcile`]). Without both, the reconciler is off.
#[derive(Clone, Debug, clap::Args)]
pub struct GamesFeedConfig {
    /// The games service, `http://host:port`.
    #[arg(long, env = "DRAUGHTS_RATINGS_GAMES_URL")]
    pub ratings_games_url: Option<String>,
    /// This service's credential there: an API key with the `service` scope.
    #[arg(long, env = "DRAUGHTS_RATINGS_API_KEY", hide_env_values = true)]
    pub ratings_api_key: Option<String>,
}

impl GamesFeedConfig {
    /// Both or neither.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.ratings_games_url.is_some() != self.ratings_api_key.is_some() {
            return Err(ConfigError(
                "--ratings-games-url and --ratings-api-key go together (the reconciler's feed of finished games)".into(),
            ));
        }
        Ok(())
    }

    /// The feed they name, if any.
    pub fn feed(&self) -> Result<Option<Arc<dyn games_feed::FinishedFeed>>, ConfigError> {
        match (&self.ratings_games_url, &self.ratings_api_key) {
            (Some(url), Some(key)) => {
                Ok(Some(Arc::new(games_feed::GrpcFinishedFeed::new(url, key)?)))
            }
            _ => Ok(None),
        }
    }
}

impl Config {
    /// Fails fast on any unusable value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.telemetry.validate()?;
        self.backends.validate()?;
        self.auth.validate()?;
        self.games.validate()?;
        self.ratings.validate()
    }

    /// Port 0 on loopback, embedded backends, test secrets, default rating settings.
    pub fn for_tests() -> Config {
        Config {
            server: ServerConfig::for_tests(),
            telemetry: TelemetryConfig::for_tests(),
            backends: BackendConfig::embedded_for_tests(),
            auth: AuthConfig::for_tests(),
            ratings: RatingsConfig::defaults(),
            games: GamesFeedConfig {
                ratings_games_url: None,
                ratings_api_key: None,
            },
        }
    }
}

/// Starting the service failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("backend: {0}")]
    Store(#[from] draughts_store::StoreError),
    #[error("ratings: {0}")]
    Ratings(#[from] RatingsError),
    #[error("auth: {0}")]
    Auth(#[from] draughts_auth::AuthError),
    #[error(transparent)]
    Serve(#[from] draughts_runtime::ServeError),
}

/// The ratings service on shared backends: the domain and the stream consumer.
#[derive(Clone, Debug)]
pub struct Ratings {
    pub core: RatingsCore,
    live: Arc<dyn LiveStore>,
    config: RatingsConfig,
    /// What the reconciler reads (`None`: it is off).
    feed: Option<Arc<dyn games_feed::FinishedFeed>>,
}

impl Ratings {
    /// Builds the service on connected backends (applies the durable schema).
    pub async fn new(
        live: Arc<dyn LiveStore>,
        db: Database,
        config: &RatingsConfig,
    ) -> Result<Ratings, StartError> {
        config.validate()?;
        let core = RatingsCore::new(db, config).await?;
        Ok(Ratings {
            core,
            live,
            config: config.clone(),
            feed: None,
        })
    }

    /// The same service, its reconciler reading `feed`: the finished games the games service
    /// publishes (without one the reconciler is off).
    pub fn with_finished_feed(mut self, feed: Arc<dyn games_feed::FinishedFeed>) -> Ratings {
        self.feed = Some(feed);
        self
    }

    /// Adds `draughts.v1.Ratings` to a host, behind the authentication layer of `auth`.
    pub fn register(&self, services: &mut Services, server: &ServerConfig, auth: &Authenticator) {
        let service =
            grpc::RatingsService::new(self.core.clone()).with_identities(auth.identities().clone());
        let ratings =
            RatingsServer::new(service).max_decoding_message_size(server.max_message_bytes);
        let layer = AuthLayer::new(auth.clone()).with_policy(RATINGS_READS);
        services.add(tower::Layer::layer(&layer, ratings));
    }

    /// The stream consumer this service runs (named by the configuration, else uniquely).
    pub fn consumer(&self) -> Consumer {
        let consumer = Consumer::new(self.live.clone(), self.core.clone(), &self.config);
        match &self.feed {
            Some(feed) => consumer.with_feed(feed.clone()),
            None => consumer,
        }
    }

    /// Applies finished games from the stream until `shutdown` resolves (then finishes the batch in
    /// hand). Every replica runs one; each entry goes to one of them.
    pub async fn run_consumer(self, shutdown: impl Future<Output = ()>) {
        self.consumer().run(shutdown).await
    }
}

/// Connects the backends named in the configuration.
pub async fn connect(
    backends: &BackendConfig,
) -> Result<(Arc<dyn LiveStore>, Database), StartError> {
    let live = draughts_store::open_live_store(&backends.redis_url, &backends.key_prefix).await?;
    let db = Database::connect(&backends.database_url).await?;
    Ok((live, db))
}

/// Serves `draughts.v1.Ratings` on `listener` and runs the stream consumer until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    config.validate()?;
    let (live, db) = connect(&config.backends).await?;
    let auth = Authenticator::new(config.auth.clone(), live.clone())?;
    let mut ratings = Ratings::new(live, db, &config.ratings).await?;
    match config.games.feed()? {
        Some(feed) => ratings = ratings.with_finished_feed(feed),
        None if config.ratings.reconcile_interval_ms > 0 => tracing::warn!(
            "no --ratings-games-url and --ratings-api-key: the reconciler is off (a finished game whose stream entry is lost is never rated)"
        ),
        None => {}
    }
    let mut services = Services::new();
    ratings.register(&mut services, &config.server, &auth);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let consumer = tokio::spawn(ratings.run_consumer(async move {
        let _ = stop_rx.changed().await;
    }));
    let served = draughts_runtime::serve(&config.server, services, listener, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = consumer.await;
    served?;
    Ok(())
}
