//! Standard output that a closed pipe ends quietly: `hpactl replay DIR | head` stops when
//! `head` has read its lines, as a command-line tool should, instead of panicking in
//! `println!` ("failed printing to stdout: Broken pipe"). Other write errors are reported once
//! on standard error, and the process exits 1.

use std::fmt;
use std::io::{self, Write as _};

/// Writes one line to standard output; on a closed pipe the process exits 0 at once (the
/// reader wanted no more), on another error it exits 1.
pub fn line(args: fmt::Arguments<'_>) {
    let mut stdout = io::stdout().lock();
    let result = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    if let Err(e) = result {
        exit_on(&e);
    }
}

/// Writes `text` as is to standard output, with [`line()`]'s handling of errors.
pub fn text(text: &str) {
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        exit_on(&e);
    }
}

/// Whether `e` is the reader closing the pipe.
pub fn is_closed_pipe(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}

fn exit_on(e: &io::Error) -> ! {
    if is_closed_pipe(e) {
        std::process::exit(0);
    }
    eprintln!("writing to standard output: {e}");
    std::process::exit(1);
}

/// `println!` through [`line()`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;
