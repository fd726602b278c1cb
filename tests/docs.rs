//! The developer docs against the tree they describe: every folder and file of `src/` in
//! docs/development.md's layout, and every command of `eddy --help` in DESIGN.md's table of
//! daemons and commands (and nothing there that the binary does not have). A list that drifted
//! fails here, naming what to add or remove.
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fenced block under `## Layout` in docs/development.md.
fn layout_block() -> String {
    let doc = read("docs/development.md");
    let after = doc
        .split_once("## Layout")
        .expect("docs/development.md has a `## Layout` section")
        .1;
    let body = after.split_once("```").expect("a fenced block").1;
    body.split_once("```")
        .expect("the block ends")
        .0
        .to_string()
}

#[test]
fn the_layout_names_every_room_of_src() {
    let layout = layout_block();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&src).expect("src/") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        let shown = if entry.path().is_dir() {
            format!("src/{name}/")
        } else {
            format!("src/{name}")
        };
        // A name followed by a space or the end of a line, so `src/ui/` is not found in
        // `src/ui/auth`.
        let listed = layout.lines().any(|l| {
            l.split_whitespace()
                .any(|w| w.trim_end_matches([';', ',']) == shown)
        });
        if !listed {
            missing.push(shown);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/development.md's layout does not name {missing:?}: add a line for each"
    );
    // And nothing it names is gone.
    let gone: Vec<&str> = layout
        .split_whitespace()
        .filter(|w| w.starts_with("src/"))
        .map(|w| w.trim_end_matches([';', ',']))
        .filter(|w| !Path::new(env!("CARGO_MANIFEST_DIR")).join(w).exists())
        .collect();
    assert!(
        gone.is_empty(),
        "docs/development.md's layout names {gone:?}, which src/ no longer has"
    );
}

/// The subcommands `eddy --help` lists (without clap's own `help`).
fn commands_of_the_binary() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .arg("--help")
        .output()
        .expect("run eddy --help");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let commands = text
        .split_once("Commands:")
        .expect("a Commands: section")
        .1
        .split("Options:")
        .next()
        .unwrap_or_default()
        .to_string();
    commands
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The commands DESIGN.md's table lists: rows starting with `` | `eddy X ``.
fn commands_of_the_design() -> BTreeSet<String> {
    read("DESIGN.md")
        .lines()
        .filter_map(|l| l.strip_prefix("| `eddy "))
        .filter_map(|rest| rest.split(|c: char| c == '`' || c.is_whitespace()).next())
        .map(str::to_string)
        .collect()
}

#[test]
fn design_lists_exactly_the_commands_of_the_binary() {
    let binary = commands_of_the_binary();
    let design = commands_of_the_design();
    assert!(
        binary.len() >= 10,
        "parsed too few commands from `eddy --help`: {binary:?}"
    );
    let undocumented: Vec<_> = binary.difference(&design).collect();
    let stale: Vec<_> = design.difference(&binary).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "DESIGN.md's table of daemons and commands: add {undocumented:?}, remove {stale:?}"
    );
}

#[test]
fn design_counts_the_daemons_it_lists() {
    // The daemons are the commands `main.rs` starts through its one `daemon` start-up.
    let main = read("src/main.rs");
    let daemons = main.matches("daemon(cfg, |").count();
    let words = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
    ];
    let said = format!(
        "eddy is {} daemons",
        words.get(daemons).copied().unwrap_or("many")
    );
    assert!(
        read("DESIGN.md").contains(&said),
        "main.rs starts {daemons} daemons; DESIGN.md's first line should say \"{said}\""
    );
}
