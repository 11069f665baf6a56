//! Free loopback ports for the controllers a test starts (included with `#[path]` by the tests
//! of both binaries that start more than one process on loopback).

/// A free loopback port for each of `n` processes (bound together, so distinct, then released
/// for the processes to take).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}
