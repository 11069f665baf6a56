//! The control plane's processes: started in the background with their output in
//! `DIR/logs/NAME.log`, recorded in `DIR/run/NAME.json` (pid, program, arguments), and stopped
//! by pid, so that `hpactl cluster down` stops what `cluster up` started in another process.
//!
//! A recorded pid is trusted only while `/proc/PID/exe` is still the recorded program (a pid
//! reused by another process is never signalled), and a zombie counts as stopped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use serde::{Deserialize, Serialize};

/// Why a process could not be started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Spawning failed.
    #[error("starting {name} ({program}): {source}")]
    Spawn {
        /// The component.
        name: String,
        /// The program.
        program: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file under the cluster directory could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A record file is not what this module writes.
    #[error("{path}: not a process record: {source}")]
    Record {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// The process ignored SIGTERM and SIGKILL.
    #[error("{name} (pid {pid}) did not stop")]
    Stuck {
        /// The component.
        name: String,
        /// Its pid.
        pid: u32,
    },
}

/// What is recorded of a started process.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessRecord {
    /// The component's name (`etcd`, `kube-apiserver`, ...).
    pub name: String,
    /// Its pid.
    pub pid: u32,
    /// The program, as started (absolute).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its environment additions.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Where its output goes.
    pub log: PathBuf,
}

/// `DIR/run`.
pub fn run_dir(cluster_dir: &Path) -> PathBuf {
    cluster_dir.join("run")
}

/// `DIR/logs`.
pub fn log_dir(cluster_dir: &Path) -> PathBuf {
    cluster_dir.join("logs")
}

fn record_path(cluster_dir: &Path, name: &str) -> PathBuf {
    run_dir(cluster_dir).join(format!("{name}.json"))
}

fn file_err(path: &Path) -> impl Fn(std::io::Error) -> ProcessError + '_ {
    move |source| ProcessError::File {
        path: path.to_path_buf(),
        source,
    }
}

/// Starts `program args` as component `name` of the cluster in `cluster_dir`, in its own
/// process group (a Ctrl-C at the terminal that ran `cluster up` does not reach it), output
/// appended to `DIR/logs/NAME.log`; records it.
pub fn spawn(
    cluster_dir: &Path,
    name: &str,
    program: &Path,
    args: &[String],
    env: &[(String, String)],
) -> Result<ProcessRecord, ProcessError> {
    use std::os::unix::process::CommandExt as _;
    let logs = log_dir(cluster_dir);
    std::fs::create_dir_all(&logs).map_err(file_err(&logs))?;
    let run = run_dir(cluster_dir);
    std::fs::create_dir_all(&run).map_err(file_err(&run))?;
    let log = logs.join(format!("{name}.log"));
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(file_err(&log))?;
    let err = out.try_clone().map_err(file_err(&log))?;
    // Canonical, as /proc/PID/exe shows it (symlinks resolved).
    let program = std::fs::canonicalize(program).map_err(file_err(program))?;
    let child = Command::new(&program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .current_dir(cluster_dir)
        .process_group(0)
        .spawn()
        .map_err(|source| ProcessError::Spawn {
            name: name.to_string(),
            program: program.clone(),
            source,
        })?;
    let record = ProcessRecord {
        name: name.to_string(),
        pid: child.id(),
        program,
        args: args.to_vec(),
        env: env.to_vec(),
        log,
    };
    // The child is not waited for here: a process that outlives the caller is adopted by
    // init; one that exits while the caller runs is reaped by `reap` or at the caller's exit.
    drop(child);
    write_record(cluster_dir, &record)?;
    Ok(record)
}

fn write_record(cluster_dir: &Path, record: &ProcessRecord) -> Result<(), ProcessError> {
    let path = record_path(cluster_dir, &record.name);
    let text = serde_json::to_string_pretty(record).map_err(|source| ProcessError::Record {
        path: path.clone(),
        source,
    })?;
    std::fs::write(&path, text).map_err(file_err(&path))
}

/// The record of component `name`, if one was written.
pub fn read_record(cluster_dir: &Path, name: &str) -> Result<Option<ProcessRecord>, ProcessError> {
    let path = record_path(cluster_dir, name);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| ProcessError::Record { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ProcessError::File { path, source }),
    }
}

/// Every record of the cluster, in no particular order.
pub fn records(cluster_dir: &Path) -> Result<Vec<ProcessRecord>, ProcessError> {
    let run = run_dir(cluster_dir);
    let entries = match std::fs::read_dir(&run) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(ProcessError::File { path: run, source }),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(file_err(&run))?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json")
            && let Some(name) = path.file_stem().and_then(|s| s.to_str())
            && let Some(r) = read_record(cluster_dir, name)?
        {
            out.push(r);
        }
    }
    Ok(out)
}

/// Reaps `pid` if it is an exited child of this process (so it does not linger as a zombie).
fn reap(pid: u32) {
    if let Some(p) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
    }
}

/// Whether the recorded process still runs (same pid, same program, not a zombie).
pub fn alive(record: &ProcessRecord) -> bool {
    reap(record.pid);
    let proc_dir = PathBuf::from(format!("/proc/{}", record.pid));
    let Ok(exe) = std::fs::read_link(proc_dir.join("exe")) else {
        return false;
    };
    // A binary replaced on disk since it started reads as "PATH (deleted)".
    let exe = exe
        .to_string_lossy()
        .trim_end_matches(" (deleted)")
        .to_string();
    if Path::new(&exe) != record.program {
        return false;
    }
    match std::fs::read_to_string(proc_dir.join("stat")) {
        // `pid (comm) S ...`: the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn signal(record: &ProcessRecord, sig: Signal) {
    if let Some(pid) = Pid::from_raw(record.pid as i32) {
        let _ = kill_process(pid, sig);
    }
}

/// Sends `SIGKILL` to a live recorded process (a crash, for the failover tests).
pub fn kill(record: &ProcessRecord) {
    if alive(record) {
        signal(record, Signal::KILL);
    }
}

/// Sends `SIGTERM` to a live recorded process.
pub fn terminate(record: &ProcessRecord) {
    if alive(record) {
        signal(record, Signal::TERM);
    }
}

/// Waits until the process has exited, up to `timeout`; whether it did.
pub fn wait_exit(record: &ProcessRecord, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if !alive(record) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops a recorded process: SIGTERM, then SIGKILL after `grace`; removes its record.
/// A process already gone is not an error.
pub fn stop(
    cluster_dir: &Path,
    record: &ProcessRecord,
    grace: Duration,
) -> Result<(), ProcessError> {
    if alive(record) {
        signal(record, Signal::TERM);
        if !wait_exit(record, grace) {
            signal(record, Signal::KILL);
            if !wait_exit(record, Duration::from_secs(5)) {
                return Err(ProcessError::Stuck {
                    name: record.name.clone(),
                    pid: record.pid,
                });
            }
        }
    }
    let path = record_path(cluster_dir, &record.name);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ProcessError::File { path, source }),
    }
}

/// Starts a stopped component again with its recorded program, arguments and environment.
pub fn restart(cluster_dir: &Path, record: &ProcessRecord) -> Result<ProcessRecord, ProcessError> {
    spawn(
        cluster_dir,
        &record.name,
        &record.program,
        &record.args,
        &record.env,
    )
}

/// The last `lines` lines of a component's log (for error messages).
pub fn log_tail(record: &ProcessRecord, lines: usize) -> String {
    let text = std::fs::read_to_string(&record.log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn spawns_records_and_stops_by_pid() {
        let dir = std::env::temp_dir().join(format!("hpa-process-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sleep = PathBuf::from("/bin/sleep");
        let r = spawn(&dir, "sleeper", &sleep, &["30".into()], &[]).unwrap();
        assert!(alive(&r));
        assert_eq!(records(&dir).unwrap().len(), 1);
        stop(&dir, &r, Duration::from_secs(5)).unwrap();
        assert!(!alive(&r));
        assert!(read_record(&dir, "sleeper").unwrap().is_none());
        // A pid whose program is another one is not ours.
        let other = ProcessRecord {
            pid: std::process::id(),
            program: PathBuf::from("/nonexistent"),
            ..r
        };
        assert!(!alive(&other));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
