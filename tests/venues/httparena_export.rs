//! `scripts/tool export httparena` writes the two folders an HttpArena pull request adds,
//! `frameworks/gnosis/` and `frameworks/gnosis-uring/`. Each must hold exactly its Dockerfile
//! (`httparena/Dockerfile` naming its binary), its meta.json, the gateway profiles' compose
//! files and the sources it builds from, and nothing else.
//!
//! The sources must be the TFB export's, byte for byte: `tests/venues/tfb_export.rs` proves that
//! folder compiles on its own, so compiling these again would only double CI's slowest step.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Removes the test's directory however the test ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Every file under `dir`, by its path relative to `dir`, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, base: &Path, found: &mut BTreeMap<String, Vec<u8>>) {
        for entry in fs::read_dir(dir).expect("readable directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, base, found);
            } else {
                let relative = path.strip_prefix(base).expect("under base");
                let name = relative.to_string_lossy().replace('\\', "/");
                found.insert(name, fs::read(&path).expect("readable file"));
            }
        }
    }
    let mut found = BTreeMap::new();
    walk(dir, dir, &mut found);
    found
}

fn export(venue: &str, root: &Path, out: &Path) {
    let status = Command::new(root.join("scripts/tool"))
        .args(["export", venue])
        .arg(out)
        .status()
        .unwrap_or_else(|error| panic!("run scripts/tool export {venue}: {error}"));
    assert!(
        status.success(),
        "scripts/tool export {venue} failed: {status}"
    );
}

#[test]
fn export_writes_both_entries_with_exactly_their_files() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let scratch = std::env::temp_dir().join(format!(
        "gnosis-httparena-export-test-{}",
        std::process::id()
    ));
    let _cleanup = TempDir(scratch.clone());
    let _ = fs::remove_dir_all(&scratch);
    let arena = scratch.join("httparena");
    let tfb = scratch.join("tfb");
    export("httparena", &root, &arena);
    export("tfb", &root, &tfb);

    let frameworks: BTreeSet<String> = fs::read_dir(arena.join("frameworks"))
        .expect("frameworks/")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        frameworks,
        BTreeSet::from(["gnosis".to_string(), "gnosis-uring".to_string()]),
        "the folders under frameworks/"
    );

    // The sources: the TFB folder's files but its TFB-only ones, byte for byte.
    let mut sources = files(&tfb.join("frameworks/Rust/gnosis"));
    for tfb_only in [
        "benchmark_config.json",
        "config.toml",
        "README.md",
        "gnosis.dockerfile",
        "gnosis-uring.dockerfile",
    ] {
        assert!(
            sources.remove(tfb_only).is_some(),
            "TFB export has {tfb_only}"
        );
    }
    assert!(sources.contains_key("Cargo.lock") && sources.contains_key("src/lib.rs"));

    for (name, engine) in [("gnosis", "epoll"), ("gnosis-uring", "io_uring")] {
        let entry = arena.join("frameworks").join(name);
        let mut exported = files(&entry);
        let dockerfile = String::from_utf8(exported.remove("Dockerfile").expect("Dockerfile"))
            .expect("Dockerfile is UTF-8");
        let meta = exported.remove("meta.json").expect("meta.json");
        // The gateway profiles' stacks, one file under the two names HttpArena looks for,
        // and production-stack's (scripts/tool verify gateway runs and checks them).
        let compose = |file: &str| fs::read(root.join("httparena").join(file)).unwrap();
        for (stack, source) in [
            ("compose.gateway.yml", "compose.gateway.yml"),
            ("compose.gateway-h3.yml", "compose.gateway.yml"),
            (
                "compose.production-stack.yml",
                "compose.production-stack.yml",
            ),
        ] {
            assert_eq!(
                exported.remove(stack),
                Some(compose(source)),
                "{name}: {stack}"
            );
        }
        assert_eq!(
            exported, sources,
            "{name}: the sources beside Dockerfile, meta.json and the compose files"
        );
        // httparena/Dockerfile with its binary named in both stages: it builds that binary
        // from the folder, runs it with no arguments on 8080, and is portable (no
        // -C target-cpu=native).
        let template = fs::read_to_string(root.join("httparena/Dockerfile")).unwrap();
        assert_eq!(template.matches("\nARG BIN=gnosis\n").count(), 2);
        assert_eq!(
            dockerfile,
            template.replace("\nARG BIN=gnosis\n", &format!("\nARG BIN={name}\n")),
            "{name}: Dockerfile"
        );
        assert!(dockerfile.contains("cargo build --release --locked --bin \"$BIN\"\n"));
        assert!(dockerfile.contains("target/release/${BIN} /server\n"));
        assert!(
            dockerfile.contains("EXPOSE 8080 8081 8082 8443/tcp 8443/udp\n")
                && dockerfile.contains("CMD [\"/server\"]\n")
        );
        assert!(
            !dockerfile
                .lines()
                .any(|line| !line.starts_with('#') && line.contains("target-cpu=native")),
            "{name}: builds with -C target-cpu=native"
        );

        let meta: serde_json::Value = serde_json::from_slice(&meta).expect("meta.json is JSON");
        assert_eq!(meta["display_name"], name);
        assert_eq!(meta["language"], "Rust");
        assert_eq!(meta["type"], "engine");
        assert_eq!(meta["engine"], engine);
        assert_eq!(meta["enabled"], true);
        assert!(meta["description"]
            .as_str()
            .is_some_and(|text| !text.is_empty()));
        assert!(meta["repo"].is_string() && meta["maintainers"].is_array());
        // The profiles HttpArena's current validator knows and both binaries pass
        // (httparena/README.md says why json is not among them), in its order.
        assert_eq!(
            meta["tests"],
            serde_json::json!([
                "baseline",
                "pipelined",
                "limited-conn",
                "json-tls",
                "8gbit",
                "async-db",
                "fortunes",
                "latency-1m",
                "latency-10k",
                "async",
                "echo-ws",
                "echo-ws-pipeline",
                "echo-ws-limited",
                "baseline-h2",
                "static-h2",
                "baseline-h2c",
                "baseline-h3",
                "static-h3",
                "gateway-64",
                "gateway-h3",
                "production-stack",
                "unary-grpc",
                "unary-grpc-tls"
            ]),
            "{name}: tests"
        );
    }
}
