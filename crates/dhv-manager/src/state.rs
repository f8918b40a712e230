//! The manager's state: one readable JSON file, `state.json`, in a state dir.
//!
//! Nomad keeps its volumes in BoltDB, keyed by volume id; we keep the same
//! records in a file a person can read and diff:
//!
//! ```json
//! {
//!   "schema": "dhv-conform/state/v1",
//!   "node_id": "…",
//!   "volumes": {
//!     "<id>": { "id": "…", "name": "…", "namespace": "…", "plugin_id": "mkdir",
//!               "host_path": "…", "bytes": 0, "create_request": { … } }
//!   }
//! }
//! ```
//!
//! Safety rules, because losing this file loses track of real data:
//! - Writes are atomic: a temp file in the same dir is written, fsynced and
//!   renamed over `state.json`, then the dir is fsynced. A crash at any instant
//!   leaves the old or the new file, never a mix; a temp file left by a crash is
//!   ignored when reading and removed by the next write.
//! - `state.json` is never followed: a symlink (or a FIFO, or a device) in its
//!   place is an error on read and on write, so a link to another node's state
//!   is never read nor written through, and no file is made outside the dir.
//!   It is read up to [`MAX_STATE_BYTES`].
//! - A file that cannot be read or parsed is an error naming it. It is never
//!   replaced by an empty state, which would silently forget every volume.
//! - Every read-modify-write holds an exclusive `flock` on `state.lock`, so that
//!   commands in separate processes never lose each other's changes; within one
//!   process a mutex queues them first, so no worker thread blocks on the lock.
//!   Plain reads take no lock: a rename is atomic, so a reader always sees a whole file.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use dhv_host::safe_fs::Links;

pub use super::state_error::StateError;
use super::volume::Volume;

/// The `schema` value of the state file this version reads and writes.
pub const STATE_SCHEMA: &str = "dhv-conform/state/v1";
/// The state file's name in the state dir.
pub const STATE_FILE: &str = "state.json";
/// The lock file's name in the state dir.
pub const LOCK_FILE: &str = "state.lock";

/// The most read from a state file: some 100,000 volumes.
pub const MAX_STATE_BYTES: u64 = 256 << 20;

/// The longest a state read-and-write waits for another process to let go
/// of [`LOCK_FILE`]: a `dhv-conform` holds it for the milliseconds of one
/// read and one write, so a holder that keeps it longer is stuck or is not
/// ours (a plugin's process may lock a file it can see, and one that left
/// the harness's reach would hold it for good): past this the update fails,
/// saying so, instead of hanging.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

const TEMP_PREFIX: &str = ".state.json.";
const TEMP_SUFFIX: &str = ".tmp";

/// The whole state: the node id and every volume, keyed by id.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// The node id generated for this state dir, once.
    pub node_id: Option<String>,
    /// Every volume, keyed by its id.
    pub volumes: BTreeMap<String, Volume>,
}

impl State {
    /// The volume that holds `name`, other than `id`, if any.
    pub fn name_holder(&self, name: &str, id: &str) -> Option<&Volume> {
        self.volumes.values().find(|v| v.name == name && v.id != id)
    }
}

#[derive(Serialize)]
struct OnDiskRef<'a> {
    schema: &'a str,
    node_id: &'a Option<String>,
    volumes: &'a BTreeMap<String, Volume>,
}

#[derive(Deserialize)]
struct OnDisk {
    #[serde(default)]
    schema: Option<serde_json::Value>,
    #[serde(default)]
    node_id: Option<String>,
    volumes: Entries,
}

/// The volumes object as written, every entry kept: a JSON object with a key
/// twice would otherwise quietly lose one of the two volumes.
struct Entries(Vec<(String, Volume)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Entries, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of volumes keyed by id")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Entries, A::Error> {
                let mut all = Vec::new();
                while let Some(entry) = map.next_entry::<String, Volume>()? {
                    all.push(entry);
                }
                Ok(Entries(all))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// Refuses a state that would make the manager act on the wrong volume:
/// an id twice, a key that is not its volume's id, an id that is not a
/// UUID (ids end up in paths), two volumes with one name, or a host path
/// that is empty, relative or `/` (deletes and mounts go there).
fn validate(entries: Vec<(String, Volume)>) -> Result<BTreeMap<String, Volume>, String> {
    let mut volumes = BTreeMap::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for (key, vol) in entries {
        if key != vol.id {
            return Err(format!("volume under key {key:?} has id {:?}", vol.id));
        }
        if !crate::contract::is_valid_volume_id(&key) {
            return Err(format!("volume id {key:?} is not a UUID"));
        }
        if let Some(why) = super::volume::unusable_host_path(&vol.host_path) {
            return Err(format!(
                "volume {key} has host_path {:?}, which {why}",
                vol.host_path
            ));
        }
        if let Some(other) = names.insert(vol.name.clone(), key.clone()) {
            return Err(format!(
                "volumes {other} and {key} both have the name {:?}",
                vol.name
            ));
        }
        if volumes.insert(key.clone(), vol).is_some() {
            return Err(format!("volume id {key} appears twice"));
        }
    }
    Ok(volumes)
}

/// Read when a file does not parse, so that a file of another schema is
/// reported as such rather than as whichever field happens to differ.
#[derive(Deserialize)]
struct Header {
    schema: Option<serde_json::Value>,
}

/// The state dir: reads, and locked atomic read-modify-writes.
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    writer: tokio::sync::Mutex<()>,
}

impl StateStore {
    /// Opens the state dir, creating it (mode 0700) when missing.
    pub fn open(dir: impl Into<PathBuf>) -> Result<StateStore, StateError> {
        let dir = dir.into();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| StateError::CreateDir {
                dir: dir.clone(),
                source,
            })?;
        Ok(StateStore {
            dir,
            writer: tokio::sync::Mutex::new(()),
        })
    }

    /// The state dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state file's path.
    pub fn file(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// Reads the state; a missing file is a fresh, empty state.
    pub fn load(&self) -> Result<State, StateError> {
        read_state(&self.file())
    }

    /// [`load`](Self::load) off the async workers.
    pub async fn load_async(&self) -> Result<State, StateError> {
        let file = self.file();
        run_blocking(move || read_state(&file)).await
    }

    /// Runs `change` on the current state under the cross-process lock and, when
    /// it returns `Ok`, writes the result atomically before the lock is released.
    /// An `Err` leaves the file untouched.
    pub async fn update<T, E, F>(&self, change: F) -> Result<T, E>
    where
        F: FnOnce(&mut State) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StateError> + Send + 'static,
    {
        let _queued = self.writer.lock().await;
        let dir = self.dir.clone();
        run_blocking(move || {
            let _lock = lock_dir(&dir)?;
            let file = dir.join(STATE_FILE);
            let mut state = read_state(&file)?;
            let out = change(&mut state)?;
            write_state(&dir, &state)?;
            Ok(out)
        })
        .await
    }

    /// This node's id: read from the state, or generated (a UUID) and saved the
    /// first time, so every later command on this state dir uses the same one.
    /// Blocking: it runs once, when a manager opens.
    pub fn node_id_blocking(&self) -> Result<String, StateError> {
        if let Some(id) = self.load()?.node_id {
            return Ok(id);
        }
        // Checked again under the lock: two processes opening a fresh state dir
        // at once must agree on one id.
        let _lock = lock_dir(&self.dir)?;
        let mut state = self.load()?;
        if let Some(id) = state.node_id {
            return Ok(id);
        }
        let id = uuid::Uuid::new_v4().to_string();
        state.node_id = Some(id.clone());
        write_state(&self.dir, &state)?;
        Ok(id)
    }
}

/// Runs file work on the blocking pool; a panic there is re-raised here, since
/// it is a bug in our own code, not a state problem.
async fn run_blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(out) => out,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

fn read_state(path: &Path) -> Result<State, StateError> {
    // Never through a symlink: one planted as state.json would have us read
    // (and then write) another node's volumes. Never a FIFO, never unbounded.
    let bytes = match dhv_host::safe_fs::read_bounded(path, MAX_STATE_BYTES, Links::Refuse) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(State::default()),
        Err(dhv_host::safe_fs::ReadError::NotRegular { kind, .. }) => {
            return Err(StateError::Planted {
                path: path.to_path_buf(),
                kind,
            });
        }
        Err(e) => {
            return Err(StateError::Read {
                path: path.to_path_buf(),
                source: e.into_io(),
            });
        }
    };
    parse_state(path, &bytes)
}

fn parse_state(path: &Path, bytes: &[u8]) -> Result<State, StateError> {
    let invalid = |reason: String| StateError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    // One parse when the file is good (it can be large); the header is only read
    // again to explain a failure by the schema when that is the real cause.
    let parsed = serde_json::from_slice::<OnDisk>(bytes);
    let schema = match &parsed {
        Ok(disk) => Some(disk.schema.clone()),
        Err(_) => serde_json::from_slice::<Header>(bytes)
            .ok()
            .map(|h| h.schema),
    };
    match schema {
        Some(Some(serde_json::Value::String(s))) if s == STATE_SCHEMA => {}
        Some(Some(other)) => {
            return Err(invalid(format!(
                "schema is {other}, expected \"{STATE_SCHEMA}\""
            )));
        }
        Some(None) => {
            return Err(invalid(format!(
                "no \"schema\" field (expected \"{STATE_SCHEMA}\")"
            )));
        }
        // Not even a JSON object: the parser's error says where.
        None => {}
    }
    let disk = parsed.map_err(|source| StateError::Corrupt {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(State {
        node_id: disk.node_id,
        volumes: validate(disk.volumes.0).map_err(invalid)?,
    })
}

/// Takes the exclusive lock on `state.lock`; released when the value drops.
/// Anything but a regular file there (a FIFO, a device, a socket, a symlink)
/// was planted: refused, naming it, and never opened for use, so opening it
/// cannot block or reach a device. Waits at most [`LOCK_WAIT`] for another
/// holder.
fn lock_dir(dir: &Path) -> Result<Flock<File>, StateError> {
    lock_dir_within(dir, LOCK_WAIT)
}

/// [`lock_dir`], waiting at most `bound` for another holder.
fn lock_dir_within(dir: &Path, bound: std::time::Duration) -> Result<Flock<File>, StateError> {
    let path = dir.join(LOCK_FILE);
    let file = open_lock_file(&path)?;
    lock_within(file, &path, bound)
}

/// Opens (making it if need be) the lock file at `path`, refusing anything
/// but a regular file.
fn open_lock_file(path: &Path) -> Result<File, StateError> {
    let lock_err = |source| StateError::Lock {
        path: path.to_path_buf(),
        source,
    };
    let planted = |kind| StateError::Planted {
        path: path.to_path_buf(),
        kind,
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => {
            return Err(planted(dhv_host::safe_fs::kind_name(&m.file_type())));
        }
        _ => {}
    }
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        // A symlink planted as the lock file must not make a file elsewhere;
        // one swapped in after the look above must not block or be a tty.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(planted("a symbolic link")),
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Err(planted("a socket")),
        Err(e) => return Err(lock_err(e)),
    };
    let kind = file.metadata().map_err(lock_err)?.file_type();
    if !kind.is_file() {
        return Err(planted(dhv_host::safe_fs::kind_name(&kind)));
    }
    Ok(file)
}

/// Takes the exclusive lock on `file` (the lock file at `path`), waiting at
/// most `bound` for another holder.
fn lock_within(
    mut file: File,
    path: &Path,
    bound: std::time::Duration,
) -> Result<Flock<File>, StateError> {
    let lock_err = |source| StateError::Lock {
        path: path.to_path_buf(),
        source,
    };
    // flock has no timed wait: it is tried, and tried again after a pause
    // that grows to 50 ms (a holder that is ours lets go within a few).
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((f, nix::errno::Errno::EINTR)) => file = f,
            Err((f, nix::errno::Errno::EWOULDBLOCK)) => {
                if started.elapsed() >= bound {
                    return Err(lock_err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "another process has held it for {} s (a dhv-conform holds it for a moment; a process that keeps it is stuck or not ours)",
                            bound.as_secs_f64()
                        ),
                    )));
                }
                file = f;
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err((_, errno)) => return Err(lock_err(errno.into())),
        }
    }
}

/// Writes `state` atomically. Must be called with the lock held: it also removes
/// temp files that crashed writers left, which only a lock holder may do.
fn write_state(dir: &Path, state: &State) -> Result<(), StateError> {
    let target = dir.join(STATE_FILE);
    let write_err = |source| StateError::Write {
        path: target.clone(),
        source,
    };
    remove_stale_temps(dir);
    let mut bytes = serde_json::to_vec_pretty(&OnDiskRef {
        schema: STATE_SCHEMA,
        node_id: &state.node_id,
        volumes: &state.volumes,
    })
    .map_err(|e| write_err(e.into()))?;
    bytes.push(b'\n');
    let opts = dhv_host::safe_fs::WriteOptions {
        // The state holds the volumes' parameters: readable by root only.
        mode: 0o600,
        durable: true,
        temp_prefix: TEMP_PREFIX,
        temp_suffix: TEMP_SUFFIX,
    };
    // Replaced in its own dir, never followed: a symlink there is an error.
    dhv_host::safe_fs::replace_file(&target, &bytes, &opts).map_err(|e| write_err(e.source))
}

fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX) {
            // Best effort: a leftover is harmless, only untidy.
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
