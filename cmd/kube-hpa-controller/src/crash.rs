//! A panic anywhere ends the process, as it ends kube-controller-manager.
//!
//! Mirrors apimachinery's `utilruntime.HandleCrash` (`pkg/util/runtime/runtime.go`): every
//! goroutine KCM starts through `wait.Until` and friends recovers a panic only to log it
//! (`"Observed a panic"`, with the stack) and panic again (`ReallyCrash` is true), and an
//! unrecovered panic exits a Go program with status 2. Here tokio would catch a panic in a
//! task and let the process run on without that task: an informer, a scale target watch,
//! the server or leader election gone while `/readyz` still answers. The hook installed by
//! [`exit_on_panic`] logs the panic and exits with status 2 instead, so the Deployment
//! restarts the process. Workers included: upstream's re-panic ends KCM from a worker too.

use std::backtrace::Backtrace;

/// KCM's exit status after an unrecovered panic (Go's).
pub const PANIC_EXIT_CODE: i32 = 2;

/// Installs the process-wide panic hook: log `"Observed a panic"` (error, with the panic's
/// message, location and a backtrace), print the standard panic message, then exit with
/// [`PANIC_EXIT_CODE`].
pub fn exit_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(not a string)".to_owned());
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let stacktrace = Backtrace::force_capture().to_string();
        tracing::error!(
            panic = %message,
            location = %location,
            thread = std::thread::current().name().unwrap_or("?"),
            stacktrace = %stacktrace,
            "Observed a panic"
        );
        default(info);
        std::process::exit(PANIC_EXIT_CODE);
    }));
}
