//! The in-process guards against `eddy replay`: the Python wheel's and the Node addon's `Local`,
//! fed a trace one event at a time as an agent feeds them, return byte for byte the output events
//! `eddy replay` prints for it, for tests/corpus, tests/corpus_heldout and a simulated fleet with
//! runs that time out and are evicted, over one partition and four. So do the events the
//! packages serialise themselves (what their Emitters put on the topic), and their `replay`
//! commands. Both packages are built from this checkout by scripts/bootstrap.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn eddy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_eddy"))
}

/// `eddy replay`'s stdout, and the last line of its stderr (the closing count).
fn replay(file: &Path, partitions: u32, config: Option<&Path>) -> (Vec<u8>, String) {
    let mut cmd = eddy();
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    cmd.arg("replay")
        .arg(file)
        .args(["--partitions", &partitions.to_string()]);
    let out = run(&mut cmd);
    (out.stdout, last_line(&out.stderr))
}

fn last_line(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

fn same_bytes(what: &str, got: &[u8], want: &[u8]) {
    if got == want {
        return;
    }
    let (g, w) = (String::from_utf8_lossy(got), String::from_utf8_lossy(want));
    let at = g
        .lines()
        .zip(w.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(g.lines().count().min(w.lines().count()));
    panic!(
        "{what}: differs from eddy replay at output line {} ({} lines vs {})\n got: {}\nwant: {}",
        at + 1,
        g.lines().count(),
        w.lines().count(),
        g.lines().nth(at).unwrap_or("<none>"),
        w.lines().nth(at).unwrap_or("<none>")
    );
}

struct Case {
    name: &'static str,
    file: PathBuf,
    config: Option<PathBuf>,
}

/// The two corpora, and a simulated fleet replayed with an idle timeout and an open-run cap
/// small enough that runs end by timeout and by eviction (the event-time rules a long-lived
/// process relies on).
fn cases(dir: &Path) -> Vec<Case> {
    let fleet = dir.join("fleet.jsonl");
    run(eddy()
        .args([
            "simulate",
            "--runs",
            "300",
            "--unfinished-rate",
            "0.2",
            "--seed",
            "11",
            "--out",
        ])
        .arg(&fleet));
    let small = dir.join("small.toml");
    std::fs::write(
        &small,
        "[engine]\nidle_timeout_ms = 20000\nmax_open_runs = 8\n",
    )
    .expect("write config");
    vec![
        Case {
            name: "corpus",
            file: Path::new(ROOT).join("tests/corpus/events.jsonl"),
            config: None,
        },
        Case {
            name: "corpus_heldout",
            file: Path::new(ROOT).join("tests/corpus_heldout/events.jsonl"),
            config: None,
        },
        Case {
            name: "fleet",
            file: fleet,
            config: Some(small),
        },
    ]
}

/// The replay of each case is worth comparing against: it stops runs, and (the fleet) ends runs
/// by timeout and by eviction.
fn check_case(case: &Case, partitions: u32, want: &[u8]) {
    let text = String::from_utf8_lossy(want);
    assert!(
        text.contains(r#""severity":"stop""#),
        "{}: replay stops no run",
        case.name
    );
    if case.name == "fleet" {
        for reason in ["timeout", "evicted"] {
            assert!(
                text.contains(&format!(r#""termination_reason":"{reason}""#)),
                "fleet over {partitions} partitions: no run ends by {reason}"
            );
        }
    }
}

fn require(cmd: &mut Command, how: &str) {
    match cmd.output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("{how}\n{}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!("{how} ({e})"),
    }
}

/// One language's guard: `feed` runs its driver (FILE, partitions, config, serialised-events
/// path or none), `cli` its replay command.
fn differential(
    lang: &str,
    feed: impl Fn(&Path, u32, Option<&Path>, Option<&Path>) -> Output,
    cli: impl Fn(&Path, u32, Option<&Path>) -> Output,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    for case in cases(dir.path()) {
        let config = case.config.as_deref();
        for partitions in [1, 4] {
            let what = format!("{lang} {} over {partitions} partitions", case.name);
            let (want, closing) = replay(&case.file, partitions, config);
            check_case(&case, partitions, &want);
            // Each line as the agent's own JSON text.
            same_bytes(
                &format!("{what}, events as text"),
                &feed(&case.file, partitions, config, None).stdout,
                &want,
            );
            // Each event as an object the package serialises, as its Emitter would send it.
            let sent = dir.path().join("sent.jsonl");
            let got = feed(&case.file, partitions, config, Some(&sent)).stdout;
            let (want_sent, _) = replay(&sent, partitions, config);
            same_bytes(&format!("{what}, events as objects"), &got, &want_sent);
            // The package's replay command.
            let out = cli(&case.file, partitions, config);
            same_bytes(&format!("{what}, replay command"), &out.stdout, &want);
            assert_eq!(last_line(&out.stderr), closing, "{what}: closing line");
        }
    }
}

#[test]
fn the_python_guard_gives_what_eddy_replay_gives_byte_for_byte() {
    require(
        Command::new("python3").args(["-c", "import eddy_agent._engine"]),
        "python3 cannot import eddy_agent's engine: run scripts/bootstrap (it builds the wheel \
         from clients/python), or `pip install ./clients/python`",
    );
    differential(
        "python",
        |file, partitions, config, sent| {
            let mut cmd = Command::new("python3");
            cmd.arg(Path::new(ROOT).join("tests/inproc_python.py"))
                .arg(file)
                .args(["--partitions", &partitions.to_string()]);
            if let Some(c) = config {
                cmd.arg("--config").arg(c);
            }
            if let Some(s) = sent {
                cmd.arg("--as-dicts").arg(s);
            }
            run(&mut cmd)
        },
        |file, partitions, config| {
            let mut cmd = Command::new("python3");
            cmd.args(["-m", "eddy_agent", "replay"])
                .arg(file)
                .args(["--partitions", &partitions.to_string()]);
            if let Some(c) = config {
                cmd.arg("--config").arg(c);
            }
            run(&mut cmd)
        },
    );
}

fn node_package() -> PathBuf {
    let pkg = Path::new(ROOT).join("clients/typescript");
    for built in ["dist/src/index.js", "eddy-agent.linux-x64-gnu.node"] {
        assert!(
            pkg.join(built).exists(),
            "clients/typescript/{built} is missing: run scripts/bootstrap (it builds the package), \
             or `npm ci && npm run build` in clients/typescript"
        );
    }
    pkg
}

#[test]
fn the_node_guard_gives_what_eddy_replay_gives_byte_for_byte() {
    let pkg = node_package();
    require(
        Command::new("node").arg("--version"),
        "node is required (Node.js 20 or later)",
    );
    differential(
        "node",
        |file, partitions, config, sent| {
            let mut cmd = Command::new("node");
            cmd.arg(Path::new(ROOT).join("tests/inproc_node.js"))
                .arg(file)
                .args(["--partitions", &partitions.to_string()]);
            if let Some(c) = config {
                cmd.args(["--config"]).arg(c);
            }
            if let Some(s) = sent {
                cmd.arg("--as-objects").arg(s);
            }
            run(&mut cmd)
        },
        |file, partitions, config| {
            let mut cmd = Command::new("node");
            cmd.arg(pkg.join("dist/src/cli.js"))
                .arg("replay")
                .arg(file)
                .args(["--partitions", &partitions.to_string()]);
            if let Some(c) = config {
                cmd.arg("--config").arg(c);
            }
            run(&mut cmd)
        },
    );
}

/// `name = "..."` / `version = "..."` pairs of a Cargo.lock.
fn locked(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let field = |l: &str, k: &str| {
        l.strip_prefix(k)
            .map(|v| v.trim_matches(|c| c == '"' || c == ' ').to_string())
    };
    let mut out = Vec::new();
    let mut name = None;
    for l in text.lines() {
        if let Some(n) = field(l, "name = ") {
            name = Some(n);
        } else if let (Some(v), Some(n)) = (field(l, "version = "), name.take()) {
            out.push((n, v));
        }
    }
    out
}

/// The wheel and the addon compile the engine with the dependency versions the binary is built
/// with: every package both lock files name is at a version the root's Cargo.lock has.
#[test]
fn the_bindings_lock_the_engines_dependencies_at_the_binarys_versions() {
    let root = locked(&Path::new(ROOT).join("Cargo.lock"));
    assert!(root.iter().any(|(n, _)| n == "serde_json"));
    for binding in [
        "clients/python/native/Cargo.lock",
        "clients/typescript/native/Cargo.lock",
    ] {
        let mut shared = 0;
        for (name, version) in locked(&Path::new(ROOT).join(binding)) {
            let versions: Vec<&str> = root
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
                .collect();
            if versions.is_empty() {
                continue;
            }
            shared += 1;
            assert!(
                versions.contains(&version.as_str()),
                "{binding} locks {name} {version}, Cargo.lock {versions:?}: copy the root's \
                 Cargo.lock over it and build again"
            );
        }
        assert!(shared > 20, "{binding}: only {shared} packages in common");
    }
}
