//! The platform as a distributed system, for the system tests (`tests/system.rs`,
//! `tests/tournaments.rs`): every service binary in its own processes (replicated), the analysis
//! workers, one real `redis-server` (append-only file) and one real PostgreSQL, all started here on
//! free ports of 127.0.0.1; clients that reach the replicas the way a client behind a load balancer
//! does (the next replica when one is gone); and the faults (SIGKILL and restart of a process, a Redis
//! restart).
//!
//! The binaries are the ones cargo built for this profile (`target/<profile>/`, beside the test's own
//! `deps/` folder): `cargo test --workspace` builds them; run alone, build them first with `cargo build
//! --workspace --bins`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use draughts_testkit::{PostgresServer, RedisServer, free_port};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

/// The token secret every replica shares (guest tokens issued by one are accepted by all).
pub const TOKEN_SECRET: &str = "systest-only-token-secret-0123456789abcdef";
/// The test identity provider's HS256 key: [`player_token`] signs with it.
pub const JWT_KEY: &str = "systest-only-identity-provider-key-0123456789";
/// The bootstrap admin key: used once, to create the services' own API keys.
pub const ADMIN_KEY: &str = "dk_systest_only_admin_key_0123456789abcdef";
/// The key prefix of every process (a test reading the live store directly uses it too).
pub const PREFIX: &str = "sys:";

/// Where cargo put this profile's binaries: the test executable runs from `target/<profile>/deps`.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

/// The path of binary `name`, which must have been built.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace's binaries first (`cargo build --workspace --bins`; \
         `cargo test --workspace` builds them)",
        path.display()
    );
    path
}

/// One process of the platform, restartable with the same settings and port.
#[derive(Debug)]
pub struct Node {
    pub name: String,
    bin: PathBuf,
    env: Vec<(String, String)>,
    port: Option<u16>,
    child: Option<Child>,
    log: PathBuf,
    /// SIGKILLs this node has had.
    pub kills: u32,
}

impl Node {
    fn new(
        name: &str,
        bin: PathBuf,
        env: Vec<(String, String)>,
        port: Option<u16>,
        logs: &Path,
    ) -> Node {
        Node {
            name: name.to_owned(),
            bin,
            env,
            port,
            child: None,
            log: logs.join(format!("{name}.log")),
            kills: 0,
        }
    }

    /// Starts the process (its output appended to its log file).
    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the node's log");
        let mut command = Command::new(&self.bin);
        command
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log);
        if let Some(port) = self.port {
            command.env("DRAUGHTS_LISTEN", format!("127.0.0.1:{port}"));
        }
        self.child = Some(
            command
                .spawn()
                .unwrap_or_else(|e| panic!("start {} ({}): {e}", self.name, self.bin.display())),
        );
    }

    /// SIGKILL: nothing drained, nothing flushed (a crashed replica).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            self.kills += 1;
        }
    }

    /// SIGTERM, then waits (SIGKILL after 10 s).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sets (or replaces) one environment variable for the next start.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
    }

    /// `http://127.0.0.1:PORT` (gRPC nodes only).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port.expect("a gRPC node"))
    }

    /// The exit status if the process has ended by itself.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Resident memory now, KiB (`VmRSS` of `/proc/PID/status`).
    pub fn rss_kib(&self) -> Option<u64> {
        let pid = self.child.as_ref()?.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Its whole log (every start of the process, appended).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Waits until the node answers SERVING on its port, then checks that this process is still
    /// running (a node that could not bind its port exits at once, and something else may be
    /// answering there). The error says why, with the node's log.
    pub async fn wait_serving(&mut self, timeout: Duration) -> Result<(), String> {
        if let Err(e) = wait_healthy(&self.url(), timeout).await {
            return Err(format!(
                "{} not serving: {e}\n{}",
                self.name,
                self.log_tail(30)
            ));
        }
        match self.exited() {
            Some(status) => Err(format!(
                "{} exited ({status}):\n{}",
                self.name,
                self.exit_reason()
            )),
            None => Ok(()),
        }
    }

    /// Why the process ended, from its log: the last `Error:` (an error returned by `main`) or
    /// `panicked at` line with the few lines after it (the message, before any backtrace), else
    /// the log's last lines.
    pub fn exit_reason(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        match all
            .iter()
            .rposition(|l| l.starts_with("Error:") || l.contains("panicked at"))
        {
            Some(at) => all[at..all.len().min(at + 8)].join("\n"),
            None => self.log_tail(20),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How many of each process.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub validation: usize,
    pub ratings: usize,
    pub analysis: usize,
    pub workers: usize,
    pub matchmaking: usize,
    /// `draughts-tournaments` replicas (they need a ratings replica).
    pub tournaments: usize,
}

impl Scale {
    /// Two replicas of every stateless service, three workers.
    pub const SYSTEM: Scale = Scale {
        validation: 2,
        ratings: 2,
        analysis: 2,
        workers: 3,
        matchmaking: 2,
        tournaments: 0,
    };

    /// The tournaments scenario (`tests/tournaments.rs`): two replicas of tournaments and of Games
    /// (validation), one of ratings; no analysis (the players' moves are picked from Rules.ListMoves).
    pub const TOURNAMENTS: Scale = Scale {
        validation: 2,
        ratings: 1,
        analysis: 0,
        workers: 0,
        matchmaking: 0,
        tournaments: 2,
    };
}

/// The whole platform, stopped (every process killed, the servers removed) on drop.
#[derive(Debug)]
pub struct Platform {
    pub validation: Vec<Node>,
    pub ratings: Vec<Node>,
    pub analysis: Vec<Node>,
    pub workers: Vec<Node>,
    pub matchmaking: Vec<Node>,
    pub tournaments: Vec<Node>,
    pub redis: RedisServer,
    pub postgres: PostgresServer,
    /// Redis restarts done.
    pub redis_restarts: u32,
    logs: PathBuf,
}

fn ports(n: usize) -> Vec<u16> {
    (0..n).map(|_| free_port().expect("a free port")).collect()
}

impl Platform {
    /// Starts Redis, PostgreSQL, the services' API keys, then every process, and waits until every
    /// gRPC node reports SERVING.
    pub async fn start(scale: Scale, extra_env: &[(&str, &str)]) -> Platform {
        let redis = RedisServer::start().expect("redis-server");
        let postgres = PostgresServer::start().expect("postgresql");
        let database = postgres.create_database("draughts").expect("createdb");
        let logs = std::env::temp_dir().join(format!(
            "draughts-systest-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis())
        ));
        std::fs::create_dir_all(&logs).expect("log folder");
        let mut common: Vec<(String, String)> = [
            ("DRAUGHTS_REDIS_URL", redis.url()),
            ("DRAUGHTS_KEY_PREFIX", PREFIX.into()),
            ("DRAUGHTS_DATABASE_URL", database),
            ("DRAUGHTS_METRICS_LISTEN", "off".into()),
            ("DRAUGHTS_TOKEN_SECRET", TOKEN_SECRET.into()),
            ("DRAUGHTS_JWT_KEY", JWT_KEY.into()),
            ("DRAUGHTS_ADMIN_API_KEY", ADMIN_KEY.into()),
            ("DRAUGHTS_SHUTDOWN_GRACE_MS", "300".into()),
            ("RUST_LOG", "warn".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        common.extend(
            extra_env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let with = |more: Vec<(&str, String)>| {
            let mut env = common.clone();
            for (k, v) in more {
                env.retain(|(key, _)| key != k);
                env.push((k.to_owned(), v));
            }
            env
        };
        let validation_ports = ports(scale.validation);
        let ratings_ports = ports(scale.ratings);
        let analysis_ports = ports(scale.analysis);
        let matchmaking_ports = ports(scale.matchmaking);
        let tournaments_ports = ports(scale.tournaments);
        let url = |port: u16| format!("http://127.0.0.1:{port}");

        // The services' own credentials, made as an operator would: with the bootstrap admin key,
        // through Auth (served by the validation binary), before the rest starts.
        let mut bootstrap = Node::new(
            "bootstrap",
            binary("draughts-validation"),
            with(vec![]),
            Some(validation_ports[0]),
            &logs,
        );
        bootstrap.spawn();
        if let Err(e) = bootstrap.wait_serving(Duration::from_secs(60)).await {
            panic!("bootstrap validation: {e}");
        }
        let channel = Endpoint::from_shared(bootstrap.url())
            .unwrap()
            .connect()
            .await
            .expect("bootstrap channel");
        // Each service calls the others with a key of its own; `service` lets it name the player each
        // call is for, so that the call counts against that player's limit, not the key's.
        let games_key = create_key(
            &channel,
            "games",
            &[
                draughts_proto::pb::AuthScope::Analysis,
                draughts_proto::pb::AuthScope::Service,
            ],
        )
        .await;
        // Matchmaking creates agreed games for others: Games.CreateGame needs `play`, and `admin` to
        // name both players.
        let matchmaking_key = create_key(
            &channel,
            "matchmaking",
            &[
                draughts_proto::pb::AuthScope::Play,
                draughts_proto::pb::AuthScope::Admin,
                draughts_proto::pb::AuthScope::Service,
            ],
        )
        .await;
        // Tournaments creates the paired games on behalf of their White player and lists finished
        // games: `play`, `admin` and `service`.
        let tournaments_key = if scale.tournaments > 0 {
            create_key(
                &channel,
                "tournaments",
                &[
                    draughts_proto::pb::AuthScope::Play,
                    draughts_proto::pb::AuthScope::Admin,
                    draughts_proto::pb::AuthScope::Service,
                ],
            )
            .await
        } else {
            String::new()
        };
        bootstrap.stop();

        let validation = (0..scale.validation)
            .map(|i| {
                Node::new(
                    &format!("validation-{i}"),
                    binary("draughts-validation"),
                    // Without analysis replicas Games runs without the computer player.
                    with(if analysis_ports.is_empty() {
                        vec![]
                    } else {
                        vec![
                            (
                                "DRAUGHTS_ANALYSIS_URL",
                                url(analysis_ports[i % analysis_ports.len()]),
                            ),
                            ("DRAUGHTS_ANALYSIS_API_KEY", games_key.clone()),
                        ]
                    }),
                    Some(validation_ports[i]),
                    &logs,
                )
            })
            .collect::<Vec<_>>();
        let ratings = (0..scale.ratings)
            .map(|i| {
                Node::new(
                    &format!("ratings-{i}"),
                    binary("draughts-ratings"),
                    // The reconciler reads Games.ListFinishedGames with a `service` key.
                    with(vec![
                        (
                            "DRAUGHTS_RATINGS_GAMES_URL",
                            url(validation_ports[i % validation_ports.len()]),
                        ),
                        ("DRAUGHTS_RATINGS_API_KEY", matchmaking_key.clone()),
                    ]),
                    Some(ratings_ports[i]),
                    &logs,
                )
            })
            .collect::<Vec<_>>();
        let analysis = (0..scale.analysis)
            .map(|i| {
                Node::new(
                    &format!("analysis-{i}"),
                    binary("draughts-analysis"),
                    with(vec![(
                        "DRAUGHTS_ANALYSIS_GAMES_URL",
                        url(validation_ports[i % validation_ports.len()]),
                    )]),
                    Some(analysis_ports[i]),
                    &logs,
                )
            })
            .collect::<Vec<_>>();
        let workers = (0..scale.workers)
            .map(|i| {
                Node::new(
                    &format!("worker-{i}"),
                    binary("draughts-analysis-worker"),
                    with(vec![
                        ("DRAUGHTS_ANALYSIS_WORKER_NAME", format!("worker-{i}")),
                        ("DRAUGHTS_ANALYSIS_SLOTS", "1".into()),
                        ("DRAUGHTS_ANALYSIS_HASH_MB", "8".into()),
                    ]),
                    None,
                    &logs,
                )
            })
            .collect::<Vec<_>>();
        let matchmaking = (0..scale.matchmaking)
            .map(|i| {
                Node::new(
                    &format!("matchmaking-{i}"),
                    binary("draughts-matchmaking"),
                    with(vec![
                        (
                            "DRAUGHTS_MATCHMAKING_GAMES_URL",
                            url(validation_ports[i % validation_ports.len()]),
                        ),
                        (
                            "DRAUGHTS_MATCHMAKING_RATINGS_URL",
                            url(ratings_ports[i % ratings_ports.len()]),
                        ),
                        ("DRAUGHTS_MATCHMAKING_API_KEY", matchmaking_key.clone()),
                    ]),
                    Some(matchmaking_ports[i]),
                    &logs,
                )
            })
            .collect::<Vec<_>>();
        let tournaments = (0..scale.tournaments)
            .map(|i| {
                Node::new(
                    &format!("tournaments-{i}"),
                    binary("draughts-tournaments"),
                    with(vec![
                        (
                            "DRAUGHTS_TOURNAMENTS_GAMES_URL",
                            url(validation_ports[i % validation_ports.len()]),
                        ),
                        (
                            "DRAUGHTS_TOURNAMENTS_RATINGS_URL",
                            url(ratings_ports[i % ratings_ports.len()]),
                        ),
                        ("DRAUGHTS_TOURNAMENTS_API_KEY", tournaments_key.clone()),
                        // Its replica name (the lease owner's) is logged at info.
                        ("RUST_LOG", "warn,draughts_tournaments=info".into()),
                    ]),
                    Some(tournaments_ports[i]),
                    &logs,
                )
            })
            .collect::<Vec<_>>();
        let mut platform = Platform {
            validation,
            ratings,
            analysis,
            workers,
            matchmaking,
            tournaments,
            redis,
            postgres,
            redis_restarts: 0,
            logs,
        };
        for node in platform.nodes_mut() {
            node.spawn();
        }
        for node in platform.nodes_mut() {
            if node.port.is_some()
                && let Err(e) = node.wait_serving(Duration::from_secs(60)).await
            {
                panic!("did not start: {e}");
            }
        }
        // Workers serve no port: one that could not start has ended by now.
        let crashed = platform.crashed();
        assert!(
            crashed.is_empty(),
            "processes that did not start: {crashed:#?}"
        );
        platform
    }

    /// Every process.
    pub fn nodes_mut(&mut self) -> impl Iterator<Item = &mut Node> {
        self.validation
            .iter_mut()
            .chain(self.ratings.iter_mut())
            .chain(self.analysis.iter_mut())
            .chain(self.workers.iter_mut())
            .chain(self.matchmaking.iter_mut())
            .chain(self.tournaments.iter_mut())
    }

    /// Lazy channels to each replica of a service (they reconnect by themselves after a restart).
    pub fn replicas(nodes: &[Node]) -> Replicas {
        Replicas::new(nodes.iter().map(Node::url).collect())
    }

    /// The folder of the processes' logs.
    pub fn logs(&self) -> &Path {
        &self.logs
    }

    /// Restarts Redis (SIGTERM, then the same port and append-only file).
    pub fn restart_redis(&mut self) {
        self.redis.restart().expect("redis restart");
        self.redis_restarts += 1;
    }

    /// Processes that ended by themselves (a crash), with their logs.
    pub fn crashed(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for node in self.nodes_mut() {
            if let Some(status) = node.exited() {
                out.push(format!(
                    "{} exited ({status}):\n{}",
                    node.name,
                    node.exit_reason()
                ));
            }
        }
        out
    }
}

impl Drop for Platform {
    /// Every process is killed (by its [`Node`]'s drop, after this); the logs are kept only when the
    /// test is failing, for its report.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.logs);
        }
    }
}

/// Creates an API key for `owner` with `scopes`, through Auth on `channel` (with the bootstrap admin
/// key, which every replica accepts).
pub async fn create_key(
    channel: &Channel,
    owner: &str,
    scopes: &[draughts_proto::pb::AuthScope],
) -> String {
    let mut request = tonic::Request::new(draughts_proto::pb::CreateApiKeyRequest {
        owner: owner.to_owned(),
        scopes: scopes.iter().map(|s| *s as i32).collect(),
        rate_limit_per_minute: 100_000,
        expires_in_secs: 0,
    });
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {ADMIN_KEY}").parse().expect("ascii"),
    );
    draughts_proto::pb::auth_client::AuthClient::new(channel.clone())
        .create_api_key(request)
        .await
        .unwrap_or_else(|e| panic!("create the {owner} key: {e}"))
        .into_inner()
        .key
}

/// Waits until `url` answers the gRPC health check with SERVING.
pub async fn wait_healthy(url: &str, timeout: Duration) -> Result<(), String> {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(channel) = Endpoint::from_shared(url.to_owned())
            .expect("a valid URL")
            .connect()
            .await
        {
            match HealthClient::new(channel)
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
            {
                Ok(r) if r.get_ref().status == ServingStatus::Serving as i32 => return Ok(()),
                Ok(r) => last = format!("status {}", r.get_ref().status),
                Err(e) => last = e.to_string(),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{url} not SERVING after {timeout:?}: {last}"))
}

/// The replicas of one service, as a client behind a load balancer sees them.
#[derive(Clone, Debug)]
pub struct Replicas {
    channels: Vec<Channel>,
}

impl Replicas {
    pub fn new(urls: Vec<String>) -> Replicas {
        let channels = urls
            .into_iter()
            .map(|u| {
                Endpoint::from_shared(u)
                    .expect("a valid URL")
                    .connect_timeout(Duration::from_millis(500))
                    .timeout(Duration::from_secs(20))
                    .connect_lazy()
            })
            .collect();
        Replicas { channels }
    }

    /// Replica `i` (modulo the count).
    pub fn channel(&self, i: usize) -> Channel {
        self.channels[i % self.channels.len()].clone()
    }

    pub fn len(&self) -> usize {
        self.channels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }
}

/// Whether a failed call may be sent again (to another replica): the replica or a backend was gone.
pub fn retriable(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable
            | Code::Unknown
            | Code::Cancelled
            | Code::DeadlineExceeded
            | Code::Aborted
    ) || (status.code() == Code::Internal && status.message().contains("transport"))
}

/// Calls `call` on replica `first`, then on the next ones, until it succeeds, fails with an error
/// that is not [`retriable`], or `within` has passed. Returns the outcome and the retries it took.
pub async fn with_retries<T, F, Fut>(
    replicas: &Replicas,
    first: usize,
    within: Duration,
    mut call: F,
) -> (Result<T, Status>, u32)
where
    F: FnMut(Channel) -> Fut,
    Fut: Future<Output = Result<T, Status>>,
{
    let deadline = Instant::now() + within;
    let mut i = first;
    let mut retries = 0;
    loop {
        match call(replicas.channel(i)).await {
            Ok(v) => return (Ok(v), retries),
            Err(e) if retriable(&e) && Instant::now() < deadline => {
                retries += 1;
                i += 1;
                tokio::time::sleep(Duration::from_millis(50 * u64::from(retries.min(10)))).await;
            }
            Err(e) => return (Err(e), retries),
        }
    }
}

/// `Games.GetGame` of `id` (anonymous) from replica `first` on, [`with_retries`]: the view, or what
/// the last try answered, and the retries it took.
pub async fn get_game(
    games: &Replicas,
    first: usize,
    within: Duration,
    id: &str,
) -> (Result<draughts_proto::pb::GameView, Status>, u32) {
    use draughts_proto::pb;
    with_retries(games, first, within, |ch| {
        let game_id = id.to_owned();
        async move {
            pb::games_client::GamesClient::new(ch)
                .get_game(pb::GetGameRequest { game_id })
                .await
                .map(tonic::Response::into_inner)
        }
    })
    .await
}

/// `message` with `authorization: Bearer token` (the test kit's one helper).
pub use draughts_testkit::games::authed;

/// An identity-provider token for subject `sub` (player id `player:<sub>`), signed with [`JWT_KEY`].
pub fn player_token(sub: &str, name: &str) -> String {
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + 24 * 3600;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({"sub": sub, "name": name, "exp": exp}),
        &jsonwebtoken::EncodingKey::from_secret(JWT_KEY.as_bytes()).expect("an HS256 key"),
    )
    .expect("sign a test token")
}
