//! What only gnosis-uring has: its io_uring settings, running out of receive buffers, and
//! refusing clearly to start where io_uring is forbidden.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{get_request, Client, Server};

const BINARY: &str = env!("CARGO_BIN_EXE_gnosis-uring");

/// With two receive buffers per thread and the server stopped while 256 connections send
/// their pipelined batches, the resumed server finds far more data waiting than it has
/// buffers: receives end with ENOBUFS and are re-armed, and every answer still arrives,
/// in order.
#[test]
fn running_out_of_receive_buffers_loses_nothing() {
    let server = Server::start_with_env(BINARY, &[], &[("GNOSIS_URING_BUFFERS", "2".to_string())]);
    let targets: Vec<&str> = (0..16)
        .map(|i| if i % 2 == 0 { "/plaintext" } else { "/json" })
        .collect();
    let batch: String = targets.iter().map(|target| get_request(target)).collect();
    let mut clients: Vec<Client> = (0..256).map(|_| server.connect()).collect();
    for round in 0..3 {
        server.signal(libc::SIGSTOP);
        for client in &mut clients {
            client.send(batch.as_bytes());
        }
        std::thread::sleep(Duration::from_millis(100));
        server.signal(libc::SIGCONT);
        for (i, client) in clients.iter_mut().enumerate() {
            for target in &targets {
                let response = client
                    .response()
                    .unwrap_or_else(|err| panic!("connection {i}, round {round}: {err}"));
                let expected = match *target {
                    "/plaintext" => "Hello, World!",
                    _ => r#"{"message":"Hello, World!"}"#,
                };
                assert_eq!((response.status, response.text()), (200, expected));
            }
        }
    }
}

/// Connections are direct descriptors in the ring's file table: they take no descriptor
/// of the process, yet the tests' descriptor count sees them, and sees them go.
#[test]
fn connections_live_in_the_rings_file_table() {
    let server = Server::start(BINARY, &[]);
    let quiet = Duration::from_millis(300);
    let held_before = server.settled_descriptors(quiet, Duration::from_secs(10));
    let mut clients: Vec<Client> = (0..64).map(|_| server.connect()).collect();
    for client in &mut clients {
        assert_eq!(client.get("/plaintext").status, 200);
    }
    // None of them is a descriptor of the process (its total count is no measure: the
    // start-up cache load's database connection may close meanwhile).
    let described = server.describe_descriptors();
    let connection = format!("ESTABLISHED local :{} ", server.port);
    let as_descriptors = described
        .lines()
        .filter(|line| !line.starts_with("direct") && line.contains(&connection))
        .count();
    assert_eq!(as_descriptors, 0, "{described}");
    assert_eq!(
        server.held_descriptors(),
        held_before + 64,
        "{}",
        server.describe_descriptors()
    );
    drop(clients);
    let closed = Instant::now();
    while server.held_descriptors() > held_before {
        assert!(
            closed.elapsed() < Duration::from_secs(10),
            "connections still held after their clients closed:\n{}",
            server.describe_descriptors()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The code both binaries share logs under the running binary's name.
#[test]
fn its_log_lines_say_gnosis_uring() {
    let server = Server::start(BINARY, &[]);
    let log = server.log();
    assert!(log.contains("gnosis-uring: PostgreSQL target "), "{log}");
    assert!(
        log.lines().all(|line| line.starts_with("gnosis-uring: ")),
        "{log}"
    );
}

#[test]
fn sqpoll_serves_the_same() {
    let server = Server::start_with_env(BINARY, &[], &[("GNOSIS_SQPOLL", "1".to_string())]);
    let mut client = server.connect();
    client.send(get_request("/plaintext").repeat(16).as_bytes());
    for _ in 0..16 {
        assert_eq!(client.response().unwrap().text(), "Hello, World!");
    }
    assert_eq!(client.get("/json").status, 200);
}

#[test]
fn bad_settings_are_rejected_with_usage() {
    let output = Command::new(BINARY)
        .env("GNOSIS_URING_BUFFERS", "1000")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("GNOSIS_URING_BUFFERS"), "stderr: {stderr}");
}

/// Installs a seccomp filter in the child before it starts that fails io_uring_setup with
/// EPERM, as Docker's default profile does.
fn forbid_io_uring(command: &mut Command) {
    const LOAD_SYSCALL_NUMBER: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JUMP_IF_EQUAL: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let filter = [
        // seccomp_data.nr is at offset 0. The architecture is not checked: the test only
        // needs io_uring_setup refused, and every other call allowed, on this machine.
        libc::sock_filter {
            code: LOAD_SYSCALL_NUMBER,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: JUMP_IF_EQUAL,
            jt: 0,
            jf: 1,
            k: libc::SYS_io_uring_setup as u32,
        },
        libc::sock_filter {
            code: RETURN,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        },
        libc::sock_filter {
            code: RETURN,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    // SAFETY: the closure runs in the forked child before exec and only makes two
    // async-signal-safe system calls on memory that the fork copied.
    unsafe {
        command.pre_exec(move || {
            let program = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &program as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn a_seccomp_profile_that_forbids_io_uring_is_named_and_ends_the_process() {
    let mut command = Command::new(BINARY);
    command.args([
        "--port",
        &crate::common::free_port().to_string(),
        "--threads",
        "2",
    ]);
    command.args(crate::common::OtherPorts::free().args());
    forbid_io_uring(&mut command);
    let started = Instant::now();
    let output = command.output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot use io_uring") && stderr.contains("seccomp"),
        "stderr: {stderr}"
    );
}
