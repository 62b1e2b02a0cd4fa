//! `scripts/tool export tfb` writes the folder a TechEmpower pull request adds. It must hold
//! exactly the entry's files (no tests, scripts, CI or docs) and compile on its own.
//!
//! The exported folder is compiled with `cargo check --locked --offline`: that proves the
//! manifest is valid without tests/ and examples/, the lock file matches it, and every module
//! is present. The full release build of the same folder is done by
//! `scripts/tool dockerfile-check`, which follows the dockerfiles; repeating it here would double
//! the slowest step of CI.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Removes the test's directories however the test ends.
struct TempDirs(Vec<PathBuf>);

impl Drop for TempDirs {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

fn files_under(dir: &Path, base: &Path, found: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).expect("readable directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            files_under(&path, base, found);
        } else {
            let relative = path.strip_prefix(base).expect("under base");
            found.insert(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

fn expected_files(root: &Path) -> BTreeSet<String> {
    let mut expected: BTreeSet<String> = [
        "benchmark_config.json",
        "config.toml",
        "README.md",
        "Cargo.toml",
        "Cargo.lock",
        "gnosis.dockerfile",
        "gnosis-uring.dockerfile",
    ]
    .iter()
    .map(|name| format!("frameworks/Rust/gnosis/{name}"))
    .collect();
    if root.join("build.rs").exists() {
        expected.insert("frameworks/Rust/gnosis/build.rs".to_string());
    }
    let mut sources = BTreeSet::new();
    files_under(&root.join("src"), root, &mut sources);
    files_under(&root.join("templates"), root, &mut sources);
    expected.extend(
        sources
            .into_iter()
            .map(|file| format!("frameworks/Rust/gnosis/{file}")),
    );
    expected
}

#[test]
fn export_holds_exactly_the_entry_and_compiles_on_its_own() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let scratch = std::env::temp_dir().join(format!("gnosis-export-test-{}", std::process::id()));
    let out = scratch.join("tfb");
    let target = scratch.join("target");
    let _cleanup = TempDirs(vec![scratch.clone()]);
    let _ = fs::remove_dir_all(&scratch);

    let status = Command::new(root.join("scripts/tool"))
        .args(["export", "tfb"])
        .arg(&out)
        .status()
        .expect("run scripts/tool export tfb");
    assert!(status.success(), "scripts/tool export tfb failed: {status}");

    let mut exported = BTreeSet::new();
    files_under(&out, &out, &mut exported);
    assert_eq!(
        exported,
        expected_files(&root),
        "the exported folder's files"
    );

    let entry = out.join("frameworks/Rust/gnosis");
    assert_eq!(
        fs::read(entry.join("README.md")).expect("README.md"),
        fs::read(root.join("tfb/README.md")).expect("tfb/README.md"),
        "README.md is the TFB README"
    );
    let manifest = fs::read_to_string(entry.join("Cargo.toml")).expect("Cargo.toml");
    for table in ["[[test]]", "[[bench]]", "[[example]]"] {
        assert!(
            !manifest.contains(table),
            "exported Cargo.toml still names {table}"
        );
    }

    // Every test in benchmark_config.json has its dockerfile: gnosis.dockerfile for `default`,
    // gnosis-X.dockerfile for X.
    let config: serde_json::Value = serde_json::from_slice(
        &fs::read(entry.join("benchmark_config.json")).expect("benchmark_config.json"),
    )
    .expect("benchmark_config.json is JSON");
    let tests = config["tests"][0]
        .as_object()
        .expect("tests[0] is an object");
    assert!(tests.contains_key("default") && tests.contains_key("uring"));
    for name in tests.keys() {
        let dockerfile = match name.as_str() {
            "default" => "gnosis.dockerfile".to_string(),
            other => format!("gnosis-{other}.dockerfile"),
        };
        assert!(
            entry.join(&dockerfile).exists(),
            "{dockerfile} for test {name}"
        );
    }

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let check = Command::new(cargo)
        .args(["check", "--locked", "--offline"])
        .current_dir(&entry)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo check");
    assert!(
        check.status.success(),
        "cargo check in the exported folder failed:\n{}",
        String::from_utf8_lossy(&check.stderr)
    );
}
