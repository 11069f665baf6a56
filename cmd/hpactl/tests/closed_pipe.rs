//! `hpactl ... | head`: when the reader closes the pipe, hpactl stops quietly (status 0,
//! nothing on standard error) instead of panicking in `println!`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn scenarios() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test-fixtures/scenarios")
}

/// Runs hpactl with `args`, reads one line of its output, closes the pipe, and returns its
/// exit status and standard error.
fn read_one_line_then_close(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hpactl"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(!first.is_empty(), "no output from hpactl {args:?}");
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap(), stderr)
}

#[test]
fn replay_stops_quietly_when_the_reader_closes_the_pipe() {
    let dir = scenarios();
    let (status, stderr) = read_one_line_then_close(&["replay", dir.to_str().unwrap()]);
    assert!(status.success(), "status {status}, stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn generate_stops_quietly_when_the_reader_closes_the_pipe() {
    // Big enough that the YAML does not fit in the pipe's buffer.
    let (status, stderr) = read_one_line_then_close(&["generate", "--hpas", "2000"]);
    assert!(status.success(), "status {status}, stderr: {stderr}");
    assert_eq!(stderr, "");
}
