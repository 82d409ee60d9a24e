//! Throwaway servers for tests: a `redis-server`, a 3-primary Redis Cluster ([`RedisCluster`])
//! and a PostgreSQL cluster, each started on free TCP ports of 127.0.0.1 in its own temporary
//! directory and stopped (and removed) when dropped. Tests never touch servers running on the
//! default ports. [`RedisStats`] reads a node's command counts, CPU and memory for measurements.
//!
//! The helpers are synchronous (they block for the few hundred milliseconds a start
//! takes) so they work from any test, async or not.
//!
//! ```no_run
//! let redis = draughts_testkit::RedisServer::start()?;
//! println!("{}", redis.url()); // redis://127.0.0.1:PORT/
//! # Ok::<(), draughts_testkit::TestkitError>(())
//! ```
//!
//! [`ServiceUnderTest`] runs a service's `run(listener, shutdown)` in-process on `127.0.0.1:0`.
//!
//! Needs the Debian packages `redis-server` and `postgresql` (the binaries are looked up
//! on `PATH` and under `/usr/lib/postgresql/*/bin`). PostgreSQL refuses to run as root,
//! so when the tests run as root the cluster is created and run as the `postgres` user.

pub mod games;
mod service;
pub use games::{Guest, agreed_game, authed, guest};
pub use service::{ServiceUnderTest, Shutdown};

use std::ffi::OsStr;
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Why a test server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// The server's binary is not installed.
    #[error("{binary} not found: install the Debian package `{package}`")]
    Missing {
        /// The binary looked for.
        binary: &'static str,
        /// The package that provides it.
        package: &'static str,
    },
    /// A file system or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The server did not come up in time; `log` is the end of its output.
    #[error("{server} did not start: {reason}\n--- log ---\n{log}")]
    NotReady {
        /// Which server.
        server: &'static str,
        /// What was observed.
        reason: String,
        /// The last lines the server printed.
        log: String,
    },
}

fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TestkitError {
    let what = what.into();
    move |source| TestkitError::Io { what, source }
}

/// A TCP port on 127.0.0.1 that was free a moment ago and that this process has not handed out
/// before. Another process could take it before it is used; the servers below retry on a new
/// port when that happens.
///
/// It is drawn at random below the kernel's ephemeral range (`ip_local_port_range`), where a
/// port of `bind(0)` would come from: the local ports of outgoing connections (to Redis, to
/// PostgreSQL, between services) are taken from that range too, and one of them could hold the
/// port by the time the server binds it. And a port once handed out is never handed out again by
/// this process, so two servers of one test never get the same one (a port bound and released at
/// once is free again).
pub fn free_port() -> Result<u16, TestkitError> {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    const LOWEST: u16 = 10_000;
    let ephemeral = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    if ephemeral > LOWEST + 1_000 {
        let span = u64::from(ephemeral - LOWEST);
        for attempt in 0..2_000u64 {
            let draw = {
                use std::hash::{BuildHasher, Hasher};
                let mut hasher = std::hash::RandomState::new().build_hasher();
                hasher.write_u64(attempt);
                hasher.finish()
            };
            let port = LOWEST + (draw % span) as u16;
            if handed.contains(&port) {
                continue;
            }
            if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                handed.insert(port);
                return Ok(port);
            }
        }
    }
    // A kernel whose ephemeral range starts low (or a crowded machine): the kernel's choice.
    for _ in 0..1_000 {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(io_error("bind port 0"))?;
        let port = listener
            .local_addr()
            .map_err(io_error("read bound address"))?
            .port();
        if handed.insert(port) {
            return Ok(port);
        }
    }
    Err(TestkitError::Io {
        what: "find a port not handed out before".into(),
        source: std::io::Error::from(std::io::ErrorKind::AddrInUse),
    })
}

/// A fresh directory under the system temp dir, removed on drop (also when a test panics).
fn temp_dir(label: &str) -> Result<TempDir, TestkitError> {
    tempfile::Builder::new()
        .prefix(&format!("draughts-testkit-{label}-"))
        .tempdir()
        .map_err(io_error(format!(
            "create a temporary directory for {label}"
        )))
}

fn find_on_path(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|candidate| candidate.is_file())
}

fn tail_of(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Sends SIGTERM (or another signal) to `pid` with the `kill` command.
fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Waits up to `timeout` for `child` to exit; returns whether it did.
fn wait_exit(child: &mut Child, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}

// ---------------------------------------------------------------- redis

/// A `redis-server` on a free port of 127.0.0.1, killed on drop, persisting as production must: with
/// an append-only file (`--appendonly yes`, fsync every second) in its own temporary directory, so that
/// [`RedisServer::restart`] keeps the data like a restarted production Redis does.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    binary: PathBuf,
    dir: TempDir,
}

/// The persistence settings of every test Redis: the append-only file, no RDB snapshots.
const REDIS_PERSISTENCE: [&str; 6] = [
    "--appendonly",
    "yes",
    "--appendfsync",
    "everysec",
    "--save",
    "",
];

fn redis_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

impl RedisServer {
    /// Starts a server and waits until it answers PING.
    pub fn start() -> Result<Self, TestkitError> {
        let binary = find_on_path("redis-server").ok_or(TestkitError::Missing {
            binary: "redis-server",
            package: "redis-server",
        })?;
        let mut last_error = None;
        for _ in 0..5 {
            match RedisServer::try_start(&binary) {
                Ok(server) => return Ok(server),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| TestkitError::NotReady {
            server: "redis-server",
            reason: "no attempt made".to_owned(),
            log: String::new(),
        }))
    }

    fn try_start(binary: &Path) -> Result<Self, TestkitError> {
        let dir = temp_dir("redis")?;
        let port = free_port()?;
        let child = RedisServer::spawn(binary, port, dir.path(), &[])?;
        Ok(RedisServer {
            child,
            port,
            binary: binary.to_owned(),
            dir,
        })
    }

    /// Stops the server as an operator would (SIGTERM: Redis flushes its append-only file) and starts
    /// it again on the same port and directory; the data written before is there again.
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
        // The port may take a moment to be free again.
        let mut attempts = 0;
        loop {
            match RedisServer::spawn(&self.binary, self.port, self.dir.path(), &[]) {
                Ok(child) => {
                    self.child = child;
                    return Ok(());
                }
                Err(e) if attempts >= 20 => return Err(e),
                Err(_) => {
                    attempts += 1;
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Starts `redis-server` on `port` with its files in `dir` (and `extra` arguments) and waits
    /// until it answers PING.
    fn spawn(binary: &Path, port: u16, dir: &Path, extra: &[&str]) -> Result<Child, TestkitError> {
        let log_path = dir.join("redis.log");
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io_error("open redis log"))?;
        let log_err = log.try_clone().map_err(io_error("clone redis log"))?;
        let mut child = Command::new(binary)
            .arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1"])
            .args(REDIS_PERSISTENCE)
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(io_error("spawn redis-server"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if redis_ping(port) {
                return Ok(child);
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(TestkitError::NotReady {
                    server: "redis-server",
                    reason: format!("exited with {status}"),
                    log: tail_of(&log_path),
                });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(TestkitError::NotReady {
                    server: "redis-server",
                    reason: "no PONG within 10 s".to_owned(),
                    log: tail_of(&log_path),
                });
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a Redis node reports about its work so far (`INFO commandstats`, `INFO cpu`, `INFO memory`,
/// read with `redis-cli`): for measurements, as differences between two reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RedisStats {
    /// Calls per command (lower case; commands run inside scripts are counted too, and so is the
    /// script call itself: `evalsha`).
    pub calls: std::collections::BTreeMap<String, u64>,
    /// CPU time the server used (user + system), microseconds.
    pub cpu_us: u64,
    /// Bytes of data the server holds (`used_memory`).
    pub used_memory: u64,
}

impl RedisStats {
    /// Reads the node on `port` of 127.0.0.1 (the default stats when redis-cli is missing).
    pub fn read(port: u16) -> RedisStats {
        let info = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "info", "all"])
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default();
        let mut stats = RedisStats::default();
        let mut cpu_seconds = 0.0f64;
        for line in info.lines() {
            if let Some((name, rest)) = line
                .strip_prefix("cmdstat_")
                .and_then(|line| line.split_once(':'))
            {
                let calls = rest
                    .strip_prefix("calls=")
                    .and_then(|rest| rest.split(',').next())
                    .and_then(|calls| calls.parse().ok())
                    .unwrap_or(0);
                stats.calls.insert(name.to_owned(), calls);
            } else if let Some(value) = line
                .strip_prefix("used_cpu_user:")
                .or_else(|| line.strip_prefix("used_cpu_sys:"))
            {
                cpu_seconds += value.trim().parse::<f64>().unwrap_or(0.0);
            } else if let Some(value) = line.strip_prefix("used_memory:") {
                stats.used_memory = value.trim().parse().unwrap_or(0);
            }
        }
        stats.cpu_us = (cpu_seconds * 1e6) as u64;
        stats
    }

    /// The sum of several nodes' stats (a cluster's primaries).
    pub fn sum(all: &[RedisStats]) -> RedisStats {
        let mut total = RedisStats::default();
        for stats in all {
            for (name, calls) in &stats.calls {
                *total.calls.entry(name.clone()).or_insert(0) += calls;
            }
            total.cpu_us += stats.cpu_us;
            total.used_memory += stats.used_memory;
        }
        total
    }

    /// What happened between `before` and `self`.
    pub fn since(&self, before: &RedisStats) -> RedisStats {
        RedisStats {
            calls: self
                .calls
                .iter()
                .map(|(name, calls)| {
                    let earlier = before.calls.get(name).copied().unwrap_or(0);
                    (name.clone(), calls.saturating_sub(earlier))
                })
                .filter(|(_, calls)| *calls > 0)
                .collect(),
            cpu_us: self.cpu_us.saturating_sub(before.cpu_us),
            used_memory: self.used_memory.saturating_sub(before.used_memory),
        }
    }

    /// Every command call, the calls of scripts' inner commands included.
    pub fn total_calls(&self) -> u64 {
        self.calls.values().sum()
    }

    /// Calls per unit of work, `n` units: `all X, cmd Y, ...` (inner commands of scripts included).
    pub fn per(&self, n: f64) -> String {
        let mut parts: Vec<String> = self
            .calls
            .iter()
            .map(|(name, calls)| format!("{name} {:.2}", *calls as f64 / n))
            .collect();
        parts.insert(0, format!("all {:.1}", self.total_calls() as f64 / n));
        parts.join(", ")
    }
}

// ---------------------------------------------------------------- redis cluster

/// A Redis Cluster of [`RedisCluster::MASTERS`] primaries (no replicas) on free ports of 127.0.0.1:
/// `redis-server --cluster-enabled yes` per node (each in its own directory, with the append-only
/// file like [`RedisServer`]), joined by `redis-cli --cluster create`, ready once every node reports
/// `cluster_state:ok`. Killed and removed on drop.
///
/// A start takes a second or two; a test binary shares one with [`RedisCluster::shared`] and gives
/// each test its own key prefix.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<(Child, u16)>,
    binary: PathBuf,
    dir: TempDir,
}

/// The arguments that make a `redis-server` a cluster node.
const CLUSTER_NODE_ARGS: [&str; 6] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "5000",
];

/// A free port `p` whose cluster bus port `p + 10000` is free too.
fn cluster_port(taken: &[u16]) -> Result<u16, TestkitError> {
    for _ in 0..200 {
        let port = free_port()?;
        if port > 55_000 || taken.contains(&port) {
            continue;
        }
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err(TestkitError::NotReady {
        server: "redis cluster",
        reason: "no free port pair (p, p + 10000) found".to_owned(),
        log: String::new(),
    })
}

/// One command on a fresh connection to `port` (inline protocol), the raw reply: whatever arrives
/// within half a second of the last byte, or up to `until` appearing.
fn redis_raw(port: u16, command: &str, until: &[&str]) -> String {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream
        .write_all(format!("{command}\r\n").as_bytes())
        .is_err()
    {
        return String::new();
    }
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stream.read(&mut chunk) {
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&reply);
        if until.iter().any(|marker| text.contains(marker)) {
            break;
        }
    }
    String::from_utf8_lossy(&reply).into_owned()
}

impl RedisCluster {
    /// How many primaries a test cluster has.
    pub const MASTERS: usize = 3;

    /// Starts the nodes, creates the cluster and waits until every node reports it ok.
    pub fn start() -> Result<Self, TestkitError> {
        let server = find_on_path("redis-server").ok_or(TestkitError::Missing {
            binary: "redis-server",
            package: "redis-server",
        })?;
        let cli = find_on_path("redis-cli").ok_or(TestkitError::Missing {
            binary: "redis-cli",
            package: "redis-tools",
        })?;
        let mut last_error = None;
        for _ in 0..3 {
            match RedisCluster::try_start(&server, &cli) {
                Ok(cluster) => return Ok(cluster),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| TestkitError::NotReady {
            server: "redis cluster",
            reason: "no attempt made".to_owned(),
            log: String::new(),
        }))
    }

    fn try_start(server: &Path, cli: &Path) -> Result<Self, TestkitError> {
        let dir = temp_dir("redis-cluster")?;
        let mut cluster = RedisCluster {
            nodes: Vec::with_capacity(Self::MASTERS),
            binary: server.to_owned(),
            dir,
        };
        let mut ports = Vec::with_capacity(Self::MASTERS);
        for _ in 0..Self::MASTERS {
            ports.push(cluster_port(&ports)?);
        }
        for &port in &ports {
            let node_dir = cluster.dir.path().join(port.to_string());
            fs::create_dir_all(&node_dir).map_err(io_error("create a node directory"))?;
            let child = RedisServer::spawn(server, port, &node_dir, &CLUSTER_NODE_ARGS)?;
            cluster.nodes.push((child, port));
        }
        let mut create = Command::new(cli);
        create.arg("--cluster").arg("create");
        for port in &ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        let output = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(io_error("run redis-cli --cluster create"))?;
        let created_log = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(TestkitError::NotReady {
                server: "redis cluster",
                reason: format!("redis-cli --cluster create exited with {}", output.status),
                log: created_log,
            });
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = ports.iter().all(|&port| {
                let info = redis_raw(port, "CLUSTER INFO", &["cluster_size:"]);
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_known_nodes:{}", Self::MASTERS))
            });
            if ok {
                return Ok(cluster);
            }
            if Instant::now() > deadline {
                return Err(TestkitError::NotReady {
                    server: "redis cluster",
                    reason: "cluster_state not ok on every node within 30 s".to_owned(),
                    log: created_log,
                });
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// One cluster for the whole test binary, started on first use. Its processes and files are
    /// removed when the test process exits (a watchdog shell polls the process), since a static is
    /// never dropped. Give each test its own key prefix.
    pub fn shared() -> Result<&'static RedisCluster, TestkitError> {
        static SHARED: std::sync::OnceLock<Result<&'static RedisCluster, String>> =
            std::sync::OnceLock::new();
        let shared = SHARED.get_or_init(|| {
            let cluster = RedisCluster::start().map_err(|e| e.to_string())?;
            let pids: Vec<String> = cluster
                .nodes
                .iter()
                .map(|(child, _)| child.id().to_string())
                .collect();
            let script = format!(
                "while kill -0 {parent} 2>/dev/null; do sleep 1; done; kill -9 {pids} 2>/dev/null; rm -rf '{dir}'",
                parent = std::process::id(),
                pids = pids.join(" "),
                dir = cluster.dir.path().display(),
            );
            Command::new("sh")
                .arg("-c")
                .arg(script)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("spawn the cluster's watchdog: {e}"))?;
            Ok(&*Box::leak(Box::new(cluster)))
        });
        shared.clone().map_err(|reason| TestkitError::NotReady {
            server: "redis cluster",
            reason,
            log: String::new(),
        })
    }

    /// Stops primary `index` as an operator would (SIGTERM: it writes its append-only file) and
    /// starts it again on the same port and directory: it comes back with its data, its slots and its
    /// place in the cluster (`nodes.conf`). Returns once every node reports `cluster_state:ok`.
    pub fn restart_node(&mut self, index: usize) -> Result<(), TestkitError> {
        let Some((child, port)) = self.nodes.get_mut(index) else {
            return Err(TestkitError::NotReady {
                server: "redis cluster",
                reason: format!("no node {index}"),
                log: String::new(),
            });
        };
        let port = *port;
        signal(child.id(), "TERM");
        let _ = child.wait();
        let node_dir = self.dir.path().join(port.to_string());
        let mut attempts = 0;
        let restarted = loop {
            match RedisServer::spawn(&self.binary, port, &node_dir, &CLUSTER_NODE_ARGS) {
                Ok(child) => break child,
                Err(e) if attempts >= 20 => return Err(e),
                Err(_) => {
                    attempts += 1;
                    thread::sleep(Duration::from_millis(100));
                }
            }
        };
        self.nodes[index].0 = restarted;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.ports().iter().all(|&port| {
            redis_raw(port, "CLUSTER INFO", &["cluster_size:"]).contains("cluster_state:ok")
        }) {
            if Instant::now() > deadline {
                return Err(TestkitError::NotReady {
                    server: "redis cluster",
                    reason: "cluster_state not ok within 30 s of a node's restart".to_owned(),
                    log: tail_of(&node_dir.join("redis.log")),
                });
            }
            thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/`: the URL the services take.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports()
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+cluster://{}/", hosts.join(","))
    }

    /// `redis://127.0.0.1:P/` of each node.
    pub fn node_urls(&self) -> Vec<String> {
        self.ports()
            .iter()
            .map(|port| format!("redis://127.0.0.1:{port}/"))
            .collect()
    }

    /// The nodes' TCP ports.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|(_, port)| *port).collect()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for (child, _) in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---------------------------------------------------------------- postgres

/// A PostgreSQL cluster in a temporary directory, on a free port of 127.0.0.1, with
/// `trust` authentication for the `postgres` role. Stopped and removed on drop.
#[derive(Debug)]
pub struct PostgresServer {
    child: Child,
    port: u16,
    bin_dir: PathBuf,
    run_as: Option<(u32, u32)>,
    _dir: TempDir,
}

/// The newest `/usr/lib/postgresql/<version>/bin` holding `postgres`, or the directory of
/// `postgres`/`initdb` on PATH.
fn postgres_bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    let initdb = find_on_path("initdb")?;
    let resolved = fs::canonicalize(&initdb).unwrap_or(initdb);
    let bin = resolved.parent()?.to_path_buf();
    bin.join("postgres").is_file().then_some(bin)
}

/// The uid and gid of OS user `name`, from /etc/passwd.
fn os_user(name: &str) -> Option<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() > 3 && fields[0] == name {
            Some((fields[2].parse().ok()?, fields[3].parse().ok()?))
        } else {
            None
        }
    })
}

fn current_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|effective| effective.parse().ok())
}

fn command_as(binary: &Path, run_as: Option<(u32, u32)>) -> Command {
    let mut command = Command::new(binary);
    if let Some((uid, gid)) = run_as {
        command.uid(uid).gid(gid);
        command.env("HOME", "/tmp");
    }
    command.env_remove("PGDATA").env("LC_ALL", "C");
    command
}

fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<(), TestkitError> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(io_error(format!("chown {}", path.display())))?;
    if path.is_dir() {
        for entry in fs::read_dir(path).map_err(io_error(format!("list {}", path.display())))? {
            let entry = entry.map_err(io_error("read directory entry"))?;
            chown_tree(&entry.path(), uid, gid)?;
        }
    }
    Ok(())
}

impl PostgresServer {
    /// Creates a cluster with `initdb` and starts `postgres` on a free port; waits until it
    /// accepts connections (`pg_isready`).
    pub fn start() -> Result<Self, TestkitError> {
        let bin_dir = postgres_bin_dir().ok_or(TestkitError::Missing {
            binary: "postgres/initdb",
            package: "postgresql",
        })?;
        let run_as = if current_uid() == Some(0) {
            Some(os_user("postgres").ok_or(TestkitError::Missing {
                binary: "OS user postgres (needed to run PostgreSQL as root)",
                package: "postgresql",
            })?)
        } else {
            None
        };
        let dir = temp_dir("postgres")?;
        // Other users must reach the socket directory inside it.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
            .map_err(io_error("chmod temp dir"))?;
        if let Some((uid, gid)) = run_as {
            chown_tree(dir.path(), uid, gid)?;
        }
        let data = dir.path().join("data");
        let initdb_log = dir.path().join("initdb.log");
        let output = command_as(&bin_dir.join("initdb"), run_as)
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(io_error("run initdb"))?;
        if !output.status.success() {
            let mut log = String::from_utf8_lossy(&output.stdout).into_owned();
            log.push_str(&String::from_utf8_lossy(&output.stderr));
            let _ = fs::write(&initdb_log, &log);
            return Err(TestkitError::NotReady {
                server: "initdb",
                reason: format!("exited with {}", output.status),
                log,
            });
        }
        let mut last_error = None;
        for _ in 0..3 {
            match PostgresServer::try_run(&bin_dir, run_as, dir.path(), &data) {
                Ok((child, port)) => {
                    return Ok(PostgresServer {
                        child,
                        port,
                        bin_dir,
                        run_as,
                        _dir: dir,
                    });
                }
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| TestkitError::NotReady {
            server: "postgres",
            reason: "no attempt made".to_owned(),
            log: String::new(),
        }))
    }

    fn try_run(
        bin_dir: &Path,
        run_as: Option<(u32, u32)>,
        dir: &Path,
        data: &Path,
    ) -> Result<(Child, u16), TestkitError> {
        let port = free_port()?;
        let log_path = dir.join(format!("postgres-{port}.log"));
        let log = fs::File::create(&log_path).map_err(io_error("create postgres log"))?;
        if let Some((uid, gid)) = run_as {
            chown_tree(&log_path, uid, gid)?;
        }
        let log_err = log.try_clone().map_err(io_error("clone postgres log"))?;
        let mut child = command_as(&bin_dir.join("postgres"), run_as)
            .arg("-D")
            .arg(data)
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(dir)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=50",
            ])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(io_error("spawn postgres"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = Command::new(bin_dir.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-U", "postgres", "-p"])
                .arg(port.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(io_error("run pg_isready"))?;
            if ready.success() {
                return Ok((child, port));
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(TestkitError::NotReady {
                    server: "postgres",
                    reason: format!("exited with {status}"),
                    log: tail_of(&log_path),
                });
            }
            if Instant::now() > deadline {
                signal(child.id(), "QUIT");
                let _ = child.wait();
                return Err(TestkitError::NotReady {
                    server: "postgres",
                    reason: "not accepting connections within 30 s".to_owned(),
                    log: tail_of(&log_path),
                });
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        self.database_url("postgres")
    }

    /// The URL of database `name` on this server (see [`create_database`](Self::create_database)).
    pub fn database_url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates an empty database `name` (with `createdb`) and returns its URL: one per
    /// test keeps tests independent on one server.
    pub fn create_database(&self, name: &str) -> Result<String, TestkitError> {
        let output = command_as(&self.bin_dir.join("createdb"), self.run_as)
            .args(["-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(self.port.to_string())
            .arg(OsStr::new(name))
            .stdin(Stdio::null())
            .output()
            .map_err(io_error("run createdb"))?;
        if !output.status.success() {
            return Err(TestkitError::NotReady {
                server: "createdb",
                reason: format!("exited with {}", output.status),
                log: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
        Ok(self.database_url(name))
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Everything database `name` holds, as `pg_dump` writes it (schema and rows, plain SQL): for
    /// tests that look for what must never be stored.
    pub fn dump(&self, name: &str) -> Result<String, TestkitError> {
        let output = command_as(&self.bin_dir.join("pg_dump"), self.run_as)
            .args(["-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(self.port.to_string())
            .arg(OsStr::new(name))
            .stdin(Stdio::null())
            .output()
            .map_err(io_error("run pg_dump"))?;
        if !output.status.success() {
            return Err(TestkitError::NotReady {
                server: "pg_dump",
                reason: format!("exited with {}", output.status),
                log: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // SIGINT = "fast shutdown": ends sessions and stops cleanly.
        signal(self.child.id(), "INT");
        if !wait_exit(&mut self.child, Duration::from_secs(10)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_port_is_bindable() {
        let port = free_port().expect("a free port");
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("the port is still free");
    }

    /// One RESP command on a fresh connection; the first reply line.
    fn redis_command(port: u16, command: &str) -> String {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.write_all(command.as_bytes()).unwrap();
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while stream.read_exact(&mut byte).is_ok() {
            reply.push(byte[0]);
            if reply.ends_with(b"\r\n") && !reply.starts_with(b"$") {
                break;
            }
            if reply.starts_with(b"$") && reply.iter().filter(|b| **b == b'\n').count() == 2 {
                break;
            }
        }
        String::from_utf8_lossy(&reply).into_owned()
    }

    /// The cluster starter gives a working 3-primary cluster: every slot served, keys on every node.
    #[test]
    fn redis_cluster_serves_every_slot() {
        let cluster =
            RedisCluster::start().expect("redis cluster (install: redis-server, redis-tools)");
        let ports = cluster.ports();
        assert_eq!(ports.len(), RedisCluster::MASTERS);
        for &port in &ports {
            let info = redis_raw(port, "CLUSTER INFO", &["cluster_size:"]);
            assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
            assert!(info.contains("cluster_size:3"), "{info}");
        }
        // A key of a slot served elsewhere is redirected.
        let replies: Vec<String> = ports
            .iter()
            .map(|&port| redis_command(port, "SET foo bar\r\n"))
            .collect();
        assert_eq!(
            replies.iter().filter(|r| r.as_str() == "+OK\r\n").count(),
            1,
            "{replies:?}"
        );
        assert_eq!(
            replies
                .iter()
                .filter(|r| r.starts_with("-MOVED 12182 "))
                .count(),
            2,
            "{replies:?}"
        );
        assert!(cluster.url().starts_with("redis+cluster://127.0.0.1:"));
    }

    /// The test Redis persists like production: what was written before a restart is there after it.
    #[test]
    fn redis_keeps_its_data_across_a_restart() {
        let mut redis = RedisServer::start().expect("redis-server (install: redis-server)");
        assert_eq!(redis_command(redis.port(), "SET kept yes\r\n"), "+OK\r\n");
        redis.restart().unwrap();
        assert_eq!(redis_command(redis.port(), "GET kept\r\n"), "$3\r\nyes\r\n");
    }

    #[test]
    fn free_ports_are_never_handed_out_twice_and_avoid_the_ephemeral_range() {
        let ephemeral = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32_768);
        let ports: Vec<u16> = (0..200).map(|_| free_port().unwrap()).collect();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port handed out twice");
        if ephemeral > 11_000 {
            assert!(
                ports.iter().all(|&p| (10_000..ephemeral).contains(&p)),
                "{ports:?}"
            );
        }
    }
}
