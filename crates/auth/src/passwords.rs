//! Account passwords: Argon2id hashes, computed off the async runtime on a bounded pool.
//!
//! Parameters are OWASP's first recommendation for Argon2id (19 MiB of memory, 2 passes, 1 lane);
//! the hash is stored as a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`), which carries its
//! parameters, so stronger ones can be adopted later and old hashes still verify.
//!
//! Hashing costs tens of milliseconds of one core and 19 MiB, on purpose. So that sign-ins never stall
//! games, hashes run on a pool of their own threads (never on the runtime's workers), which run at the
//! lowest CPU priority the system gives (niceness 19 on Linux): they use the cores the games leave
//! idle, and a game's move preempts them. At most `threads` hashes run at once, at most
//! [`MAX_WAITING`] more wait for a turn, and any beyond are refused at once with UNAVAILABLE
//! ([`AuthError::Busy`]). A password is at most [`MAX_PASSWORD_BYTES`] long, so one hash costs the
//! same whatever a caller sends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use tokio::sync::Semaphore;

use super::AuthError;

/// Argon2id memory, KiB (OWASP: 19 MiB).
pub const MEMORY_KIB: u32 = 19 * 1024;
/// Argon2id passes (OWASP: 2).
pub const PASSES: u32 = 2;
/// Argon2id lanes (OWASP: 1).
pub const LANES: u32 = 1;

/// Shortest password, in characters.
pub const MIN_PASSWORD_CHARS: usize = 8;
/// Longest password, in characters.
pub const MAX_PASSWORD_CHARS: usize = 128;
/// Longest password, in bytes (128 characters of up to 4 bytes).
pub const MAX_PASSWORD_BYTES: usize = 512;

/// Hashes waiting for a turn beyond which new ones are refused.
pub const MAX_WAITING: usize = 64;

/// A hashing job for the pool's threads.
type Job = Box<dyn FnOnce() + Send>;

/// The password hasher: a bounded pool of low-priority threads. Cheap to clone; the threads end when
/// the last clone is dropped.
#[derive(Clone)]
pub struct Passwords {
    turns: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    jobs: Arc<Mutex<mpsc::Sender<Job>>>,
    /// A hash of a random password, verified against when a username is unknown, so that an unknown
    /// username costs the same time as a wrong password.
    decoy: Arc<String>,
}

fn hasher() -> Argon2<'static> {
    let params = Params::new(MEMORY_KIB, PASSES, LANES, None).expect("valid Argon2 parameters");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// INVALID_ARGUMENT unless `password` has an acceptable length.
pub fn check_new_password(password: &str) -> Result<(), AuthError> {
    let chars = password.chars().count();
    if !(MIN_PASSWORD_CHARS..=MAX_PASSWORD_CHARS).contains(&chars)
        || password.len() > MAX_PASSWORD_BYTES
    {
        return Err(AuthError::InvalidArgument(format!(
            "password must be {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters"
        )));
    }
    Ok(())
}

fn hash_now(password: &str) -> Result<String, AuthError> {
    let salt = SaltString::generate(&mut OsRng);
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|_| AuthError::Hashing)
}

fn verify_now(password: &str, stored: &str) -> bool {
    match PasswordHash::new(stored) {
        // The stored string carries its parameters: verification uses them.
        Ok(parsed) => hasher()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => {
            tracing::error!("stored password hash does not parse");
            false
        }
    }
}

impl std::fmt::Debug for Passwords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Passwords")
            .field("free_turns", &self.turns.available_permits())
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Makes the calling thread yield to every other: on Linux the SCHED_IDLE policy (it runs only on a
/// core nothing else wants, and any other thread that wakes takes the core at once), elsewhere the
/// lowest priority the system gives.
fn lowest_priority() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::unix::{
            NormalThreadSchedulePolicy, ThreadSchedulePolicy, set_thread_priority_and_policy,
            thread_native_id,
        };
        let idle = set_thread_priority_and_policy(
            thread_native_id(),
            thread_priority::ThreadPriority::Min,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle),
        );
        if idle.is_ok() {
            return;
        }
    }
    if let Err(e) =
        thread_priority::set_current_thread_priority(thread_priority::ThreadPriority::Min)
    {
        tracing::warn!(error = ?e, "password hashing runs at normal priority");
    }
}

/// A pool thread: lowest priority, then jobs until the pool is dropped.
fn worker(jobs: Arc<Mutex<mpsc::Receiver<Job>>>) {
    lowest_priority();
    loop {
        let job = match jobs.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

impl Passwords {
    /// A pool hashing `threads` passwords at once (0 = one per core).
    pub fn new(threads: usize) -> Passwords {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for i in 0..threads {
            let receiver = receiver.clone();
            if let Err(e) = std::thread::Builder::new()
                .name(format!("password-hash-{i}"))
                .spawn(move || worker(receiver))
            {
                tracing::error!(error = %e, "a password hashing thread could not start");
            }
        }
        let decoy = {
            use rand::RngCore;
            let mut bytes = [0u8; 24];
            rand::rng().fill_bytes(&mut bytes);
            hash_now(&hex::encode(bytes)).unwrap_or_default()
        };
        Passwords {
            turns: Arc::new(Semaphore::new(threads)),
            waiting: Arc::new(AtomicUsize::new(0)),
            jobs: Arc::new(Mutex::new(sender)),
            decoy: Arc::new(decoy),
        }
    }

    /// Runs `work` on a blocking thread once a turn is free; [`AuthError::Busy`] when too many wait.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, AuthError> {
        let waiting = self.waiting.fetch_add(1, Ordering::AcqRel);
        let guard = scopeguard(&self.waiting);
        if waiting >= MAX_WAITING + self.turns.available_permits() {
            return Err(AuthError::Busy);
        }
        let permit = self
            .turns
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| AuthError::Busy)?;
        drop(guard);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _permit = permit;
            let _ = tx.send(work());
        });
        self.jobs
            .lock()
            .map_err(|_| AuthError::Hashing)?
            .send(job)
            .map_err(|_| AuthError::Hashing)?;
        rx.await.map_err(|_| AuthError::Hashing)
    }

    /// The PHC string of `password` (checked with [`check_new_password`] first).
    pub async fn hash(&self, password: &str) -> Result<String, AuthError> {
        check_new_password(password)?;
        let password = password.to_owned();
        self.run(move || hash_now(&password)).await?
    }

    /// Whether `password` matches `stored`; `None` for `stored` verifies against a decoy (and answers
    /// false) in the same time.
    pub async fn verify(&self, password: &str, stored: Option<&str>) -> Result<bool, AuthError> {
        // Longer passwords cannot match (none is stored) and are not hashed: bounded cost.
        let too_long = password.len() > MAX_PASSWORD_BYTES;
        let password = if too_long {
            String::new()
        } else {
            password.to_owned()
        };
        let (stored, real) = match stored {
            Some(stored) => (stored.to_owned(), true),
            None => (self.decoy.as_ref().clone(), false),
        };
        let matched = self.run(move || verify_now(&password, &stored)).await?;
        Ok(matched && real && !too_long)
    }
}

/// Decrements the waiting count when dropped (also when the waiting future is cancelled).
fn scopeguard(waiting: &Arc<AtomicUsize>) -> WaitingGuard {
    WaitingGuard(waiting.clone())
}

struct WaitingGuard(Arc<AtomicUsize>);

impl Drop for WaitingGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_carry_owasp_parameters() {
        let passwords = Passwords::new(1);
        let hash = passwords.hash("correct horse").await.unwrap();
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        assert!(!hash.contains("correct horse"));
        assert!(
            passwords
                .verify("correct horse", Some(&hash))
                .await
                .unwrap()
        );
        assert!(
            !passwords
                .verify("correct horsf", Some(&hash))
                .await
                .unwrap()
        );
        assert!(!passwords.verify("correct horse", None).await.unwrap());
        assert!(
            !passwords
                .verify(&"x".repeat(600), Some(&hash))
                .await
                .unwrap()
        );
        // Two hashes of one password differ (salted).
        assert_ne!(hash, passwords.hash("correct horse").await.unwrap());
    }

    /// The hashing threads yield to every other thread (SCHED_IDLE needs no privilege on Linux).
    #[cfg(target_os = "linux")]
    #[test]
    fn hashing_threads_run_when_nothing_else_wants_the_core() {
        use thread_priority::unix::{
            NormalThreadSchedulePolicy, ThreadSchedulePolicy, thread_native_id,
            thread_schedule_policy,
        };
        let policy = std::thread::spawn(|| {
            lowest_priority();
            thread_schedule_policy().map(|p| (p, thread_native_id()))
        })
        .join()
        .unwrap()
        .unwrap()
        .0;
        assert_eq!(
            policy,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle)
        );
    }

    #[test]
    fn password_lengths() {
        assert!(check_new_password("1234567").is_err());
        assert!(check_new_password("12345678").is_ok());
        assert!(check_new_password(&"é".repeat(128)).is_ok());
        assert!(check_new_password(&"x".repeat(129)).is_err());
    }

    #[tokio::test]
    async fn too_many_waiting_are_refused() {
        let passwords = Passwords::new(1);
        let stored = passwords.hash("password1").await.unwrap();
        let calls: Vec<_> = (0..(MAX_WAITING + 20))
            .map(|_| {
                let passwords = passwords.clone();
                let stored = stored.clone();
                tokio::spawn(async move { passwords.verify("password1", Some(&stored)).await })
            })
            .collect();
        let mut busy = 0;
        let mut ok = 0;
        for call in calls {
            match call.await.unwrap() {
                Ok(true) => ok += 1,
                Err(AuthError::Busy) => busy += 1,
                other => panic!("{other:?}"),
            }
        }
        assert!(busy > 0 && ok >= MAX_WAITING, "ok {ok}, busy {busy}");
        assert_eq!(passwords.waiting.load(Ordering::Acquire), 0);
    }
}
