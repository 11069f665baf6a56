//! Free loopback ports for the controllers a test starts (included with `#[path]` by the tests
//! of both binaries that start processes on loopback).
//!
//! A port is free when asked for and taken later by the process it is given to: between the
//! two, the kernel may hand it out again to the next `bind(0)`. Two controllers given the same
//! port is a test that waits on the wrong process (one of them exits with "Address already in
//! use" and the other answers for it), so no port is handed out twice in a test process.

use std::collections::HashSet;
use std::sync::Mutex;

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A free loopback port for each of `n` processes: distinct, and none handed out before in
/// this test process.
pub fn free_ports(n: usize) -> Vec<u16> {
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let handed = handed.get_or_insert_with(HashSet::new);
    // Held until all are chosen, so the kernel cannot return one of them twice here.
    let mut held = Vec::new();
    let mut ports = Vec::with_capacity(n);
    while ports.len() < n {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        if handed.insert(port) {
            ports.push(port);
        }
        held.push(listener);
    }
    ports
}

/// One free loopback port (see [`free_ports`]).
#[allow(dead_code)]
pub fn free_port() -> u16 {
    free_ports(1)[0]
}
