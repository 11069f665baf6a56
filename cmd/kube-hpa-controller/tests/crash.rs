//! A panic in a spawned task ends the process with status 2 after logging "Observed a panic",
//! as a panic ends kube-controller-manager (`utilruntime.HandleCrash` re-panics). The test
//! runs itself again as a child process that installs the binary's hook and panics in a
//! task, and checks how the child ended.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

const CHILD: &str = "KUBE_HPA_CONTROLLER_CRASH_TEST_CHILD";

#[test]
fn a_panicking_task_ends_the_process_with_status_2() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_panicking_task_ends_the_process_with_status_2",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(kube_hpa_controller::crash::PANIC_EXIT_CODE),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("Observed a panic"), "{stderr}");
    assert!(stderr.contains("informer went wrong"), "{stderr}");
    assert!(
        !stdout.contains("still running"),
        "the process went on after the panic:\n{stdout}"
    );
}

/// The child: the binary's logging and hook, then a task that panics while the main task
/// would go on (as the controller's would, with an informer gone).
fn child() {
    let options = hpa_config::options::LoggingFlags {
        logging_format: "text".into(),
        verbosity: 0,
    };
    kube_hpa_controller::logging::init(&options).unwrap();
    kube_hpa_controller::crash::exit_on_panic();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let task = tokio::spawn(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            panic!("informer went wrong");
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        println!("still running; the task ended with {:?}", task.await.err());
    });
}
