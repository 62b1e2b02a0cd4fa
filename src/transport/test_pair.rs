//! A certificate and key for tests, made once per process with the `openssl` command in a
//! temporary folder: a self-signed RSA-2048 certificate for `localhost` as `openssl req
//! -x509` makes it (basic constraints CA:TRUE, which path validation refuses for a server: the
//! pair HttpArena mounts is made so), and the key of another pair that does not match it.
//! Compiled for unit tests, and with the `test-kit` feature for the integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where the test pair lies: `server.crt`, `server.key`, and `other.key`.
pub struct TestPair {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub other_key: PathBuf,
}

/// The test pair, made on first use, then kept in the temporary folder for later processes
/// (made under a name of this process's, then renamed into place, so that a process never
/// sees half a pair).
pub fn test_pair() -> &'static TestPair {
    static PAIR: OnceLock<TestPair> = OnceLock::new();
    PAIR.get_or_init(|| {
        let folder = std::env::temp_dir().join("gnosis-test-certs");
        if !folder.join("server.crt").exists() {
            let making = folder.with_extension(std::process::id().to_string());
            make_pair(&making);
            // Another process may have put its pair in place meanwhile: then that one is used.
            if std::fs::rename(&making, &folder).is_err() {
                let _ = std::fs::remove_dir_all(&making);
            }
        }
        TestPair {
            cert: folder.join("server.crt"),
            key: folder.join("server.key"),
            other_key: folder.join("other.key"),
        }
    })
}

fn make_pair(folder: &Path) {
    std::fs::create_dir_all(folder).expect("a folder for the test certificate");
    let path = |name: &str| {
        folder
            .join(name)
            .to_str()
            .expect("a UTF-8 temporary path")
            .to_string()
    };
    openssl(&["genrsa", "-out", &path("other.key"), "2048"]);
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "3650",
        "-subj",
        "/CN=localhost",
        "-keyout",
        &path("server.key"),
        "-out",
        &path("server.crt"),
    ]);
}

fn openssl(args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .output()
        .expect("running openssl (Debian's openssl package) to make a test certificate");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
