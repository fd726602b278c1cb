//! `eddy ui` in a real headless browser (Debian's `chromium`), against a database seeded by a
//! real `eddy run` worker on a simulated fleet. The numbers each page shows are read from the
//! DOM chromium built and compared with independent SQL on the same tables (not the UI's own
//! queries). Screenshots go to `target/ui-screenshots/` (CI keeps them); with
//! `EDDY_UI_DOCS_SCREENSHOTS=1` the fleet and run pages are also copied to `docs/`.
//! The UI requires a token, as it does for users: chromium signs in with it as the password in
//! the URL (HTTP Basic, what a browser's prompt sends), the live stream's client as a bearer
//! token. tests/ui_auth.rs checks the refusals.
mod common;

use common::*;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The token the UI is started with.
const TOKEN: &str = "ui-browser-test-token-2c81e4";

struct Ui {
    child: Child,
    /// `http://user:token@host:port`, for the browser.
    base: String,
    addr: String,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_ui(cfg: &eddy::config::Config) -> Ui {
    let mut child = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["ui", "--listen", "127.0.0.1:0"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("EDDY_LOG", "warn,eddy=info")
        .env("EDDY_KAFKA_BROKERS", &cfg.kafka.brokers)
        .env("EDDY_CLICKHOUSE_URL", &cfg.clickhouse.url)
        .env("EDDY_CLICKHOUSE_DATABASE", &cfg.clickhouse.database)
        .env("EDDY_OUTPUT_TOPIC", &cfg.kafka.topics.output)
        .env("EDDY_UI_TOKENS", format!("{TOKEN}=browser-test"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn eddy ui");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("eddy ui prints its address");
    let addr = line
        .trim()
        .strip_prefix("eddy ui: http://")
        .unwrap_or_else(|| panic!("unexpected first line from eddy ui: {line:?}"))
        .trim_end_matches('/')
        .to_string();
    Ui {
        child,
        base: format!("http://browser:{TOKEN}@{addr}"),
        addr,
    }
}

fn chromium() -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        for name in ["chromium", "chromium-browser"] {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "chromium not found on PATH: the browser test needs Debian's `chromium` \
         (scripts/bootstrap installs it: apt-get install -y chromium)"
    );
}

fn screenshot_dir() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("ui-screenshots");
    std::fs::create_dir_all(&dir).expect("create target/ui-screenshots");
    dir
}

/// Run headless chromium with `extra` args on `url`; its stdout.
fn browse(url: &str, extra: &[String]) -> String {
    let profile = tempfile::tempdir().expect("profile dir");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chromium");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(status.success(), "chromium {extra:?} {url}: {status}");
            break;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish {url} within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().expect("reader")
}

fn dump_dom(url: &str) -> String {
    let dom = browse(url, &["--dump-dom".to_string()]);
    assert!(dom.contains("</html>"), "no DOM for {url}: {dom}");
    dom
}

fn screenshot(url: &str, name: &str) -> PathBuf {
    let path = screenshot_dir().join(format!("{name}.png"));
    let _ = std::fs::remove_file(&path);
    browse(
        url,
        &[
            format!("--screenshot={}", path.display()),
            "--window-size=1400,1000".to_string(),
        ],
    );
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    assert!(len > 10_000, "{name}.png is {len} bytes");
    let in_docs = matches!(name, "fleet" | "run");
    if in_docs && std::env::var("EDDY_UI_DOCS_SCREENSHOTS").is_ok_and(|v| v == "1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs")
            .join(format!("ui-{name}.png"));
        std::fs::copy(&path, docs).expect("copy screenshot to docs/");
    }
    path
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&")
}

fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    unescape(out.trim())
}

/// The body rows of table `id` in a DOM: (row class, cell texts).
fn table_rows(dom: &str, id: &str) -> Vec<(String, Vec<String>)> {
    let open = format!("<table id=\"{id}\"");
    let start = dom
        .find(&open)
        .unwrap_or_else(|| panic!("no table #{id} in the page"));
    let end = start + dom[start..].find("</table>").expect("table end");
    let body = &dom[start..end];
    let body = &body[body.find("<tbody>").map_or(0, |i| i + 7)..];
    let mut rows = Vec::new();
    for tr in body.split("<tr").skip(1) {
        let class = tr
            .split_once('>')
            .map(|(attrs, _)| attrs)
            .and_then(|a| a.split_once("class=\""))
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(c, _)| c.to_string())
            .unwrap_or_default();
        let cells: Vec<String> = tr
            .split("<td")
            .skip(1)
            .map(|td| {
                let inner = td.split_once('>').map_or("", |(_, r)| r);
                strip_tags(inner.split("</td>").next().unwrap_or(""))
            })
            .collect();
        if !cells.is_empty() {
            rows.push((class, cells));
        }
    }
    rows
}

async fn sql_rows(cfg: &eddy::config::Config, sql: &str) -> Vec<Vec<String>> {
    let client = clickhouse(cfg).with_database(&cfg.clickhouse.database);
    eddy::query::fetch_tsv(&client, sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .rows
}

fn num(s: &str) -> f64 {
    s.trim_end_matches('%')
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_show_what_clickhouse_holds() {
    let chromium = chromium();
    let ep = endpoints().await;
    let cfg = test_config(&ep, "ui");
    let fleet = Fleet::new(&cfg, 120, 32, 2);
    let _worker = spawn_worker(&cfg, &[]);
    produce(&cfg, &fleet.lines).await;
    let wait = Duration::from_secs(120);
    for (sql, want) in [
        ("SELECT count() FROM {db}.runs FINAL", fleet.runs as u64),
        ("SELECT count() FROM {db}.steps FINAL", fleet.steps),
        ("SELECT count() FROM {db}.signals FINAL", fleet.signals()),
        (
            "SELECT toUInt64(sum(runs_ended)) FROM {db}.rollup_minute FINAL",
            fleet.runs as u64,
        ),
    ] {
        assert_eq!(await_ch_count(&cfg, sql, want, wait).await, want, "{sql}");
    }
    assert!(fleet.signals() > 0, "the simulated fleet has loops");
    let ui = start_ui(&cfg);
    eprintln!("chromium: {}; ui: http://{}", chromium.display(), ui.addr);

    // Fleet page, over a window holding the whole fleet.
    let fleet_url = format!("{}/?range=30d&bucket=3600", ui.base);
    let dom = dump_dom(&fleet_url);
    // Runs and loop runs per agent from the runs table; cost inside loops from the rollup.
    let mut want: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for r in sql_rows(
        &cfg,
        "SELECT agent_name, count(), sum(loop_detected) FROM runs FINAL GROUP BY agent_name",
    )
    .await
    {
        want.entry(r[0].clone()).or_default().0 = num(&r[1]);
        want.entry(r[0].clone()).or_default().1 = num(&r[2]);
    }
    for r in sql_rows(
        &cfg,
        "SELECT agent_name, sum(loop_cost_usd) FROM rollup_minute FINAL GROUP BY agent_name",
    )
    .await
    {
        want.entry(r[0].clone()).or_default().2 = num(&r[1]);
    }
    want.retain(|_, v| v.0 > 0.0 || v.2 > 0.0);
    let agents = table_rows(&dom, "agents");
    let shown: BTreeMap<String, (f64, f64, f64)> = agents
        .iter()
        .map(|(_, c)| (c[0].clone(), (num(&c[1]), num(&c[2]), num(&c[4]))))
        .collect();
    assert_eq!(
        shown.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (agent, (runs, loops, cost)) in &want {
        let (r, l, c) = shown[agent];
        assert_eq!((r, l), (*runs, *loops), "{agent}: runs, loop runs");
        assert!(close(c, *cost), "{agent}: cost inside loops {c} vs {cost}");
        let rate = table_rows(&dom, "agents")
            .into_iter()
            .find(|(_, cells)| &cells[0] == agent)
            .map(|(_, cells)| num(&cells[3]))
            .unwrap_or_default();
        assert!(
            (rate - 100.0 * loops / runs).abs() < 0.006,
            "{agent}: loop rate {rate}%"
        );
    }
    let terms: BTreeMap<String, f64> = table_rows(&dom, "terminations")
        .into_iter()
        .map(|(_, c)| (c[0].clone(), num(&c[1])))
        .collect();
    let want_terms: BTreeMap<String, f64> = sql_rows(
        &cfg,
        "SELECT termination_reason, count() FROM runs FINAL GROUP BY termination_reason",
    )
    .await
    .into_iter()
    .map(|r| (r[0].clone(), num(&r[1])))
    .collect();
    assert_eq!(terms, want_terms, "runs by termination reason");
    let dets: BTreeMap<String, f64> = table_rows(&dom, "detectors")
        .into_iter()
        .map(|(_, c)| (c[0].clone(), num(&c[1])))
        .collect();
    let want_dets: BTreeMap<String, f64> = sql_rows(
        &cfg,
        "SELECT detector, count() FROM signals FINAL GROUP BY detector",
    )
    .await
    .into_iter()
    .map(|r| (r[0].clone(), num(&r[1])))
    .collect();
    assert_eq!(dets, want_dets, "signals by detector");
    let patterns = table_rows(&dom, "patterns");
    assert!(!patterns.is_empty(), "top loop patterns");
    let want_patterns: BTreeMap<(String, String), (f64, f64)> = sql_rows(
        &cfg,
        "SELECT detector, pattern, count(), uniqExact(project_id, run_id) FROM signals FINAL \
         GROUP BY detector, pattern",
    )
    .await
    .into_iter()
    .map(|r| ((r[0].clone(), r[1].clone()), (num(&r[2]), num(&r[3]))))
    .collect();
    for (_, c) in &patterns {
        let key = (c[0].clone(), c[1].clone());
        assert_eq!(
            want_patterns.get(&key),
            Some(&(num(&c[2]), num(&c[3]))),
            "pattern {key:?}"
        );
        assert!(!c[4].is_empty(), "pattern {key:?} links an example run");
    }
    assert!(dom.contains("id=\"chart-loop-rate\"") && dom.contains("id=\"chart-loop-cost\""));
    // The fleet spans minutes: the picture is of the last hour, by minute.
    let shot = screenshot(&format!("{}/?range=1h&bucket=60", ui.base), "fleet");
    eprintln!("screenshot: {}", shot.display());

    // Run page: the looping run with the most signals.
    let run = sql_rows(
        &cfg,
        "SELECT project_id, run_id, loop_step_index, loop_caught_step_index, has_loop_step_index \
         FROM runs FINAL WHERE loop_detected = 1 ORDER BY signals DESC, run_id LIMIT 1",
    )
    .await
    .remove(0);
    let (project, run_id) = (&run[0], &run[1]);
    let run_url = format!("{}/runs/{project}/{run_id}", ui.base);
    let dom = dump_dom(&run_url);
    let cond = format!("project_id = '{project}' AND run_id = '{run_id}'");
    let steps = table_rows(&dom, "steps");
    let want_steps = sql_rows(
        &cfg,
        &format!("SELECT step_index, tool_name, tokens FROM steps FINAL WHERE {cond} ORDER BY step_index"),
    )
    .await;
    assert_eq!(steps.len(), want_steps.len(), "steps shown");
    for ((_, got), want) in steps.iter().zip(&want_steps) {
        assert_eq!(
            (&got[0], &got[3], &got[8]),
            (&want[0], &want[1], &want[2]),
            "step, tool, tokens"
        );
    }
    let repeated = sql_rows(
        &cfg,
        &format!(
            "SELECT toUInt64(sum(c)) FROM (SELECT count() AS c FROM steps FINAL WHERE {cond} \
             AND replaceAll(hex(canonical_input_fp), '0', '') != '' \
             GROUP BY tool_name, canonical_input_fp HAVING c > 1)"
        ),
    )
    .await;
    let marked = steps
        .iter()
        .filter(|(class, _)| class.split(' ').any(|c| c == "rep"))
        .count();
    assert_eq!(marked as f64, num(&repeated[0][0]), "steps marked repeated");
    assert!(marked > 0, "a looping run has repeated steps");
    let summary: BTreeMap<String, String> = table_rows(&dom, "run-summary")
        .into_iter()
        .map(|(_, c)| (c[0].clone(), c[1].clone()))
        .collect();
    if run[4] == "1" {
        assert_eq!(summary["loop began at step"], run[2]);
    }
    assert_eq!(summary["verdict at step"], run[3]);
    let caught_rows: Vec<&String> = steps
        .iter()
        .filter(|(class, _)| class.split(' ').any(|c| c == "caught"))
        .map(|(_, c)| &c[0])
        .collect();
    assert_eq!(caught_rows, vec![&run[3]], "the verdict's step is marked");
    let signals = table_rows(&dom, "signals");
    let want_signals = sql_rows(
        &cfg,
        &format!(
            "SELECT detector, step_index, hits FROM signals FINAL WHERE {cond} \
             ORDER BY step_index, event_id"
        ),
    )
    .await;
    assert_eq!(signals.len(), want_signals.len(), "signals shown");
    for ((_, got), want) in signals.iter().zip(&want_signals) {
        assert_eq!((&got[1], &got[4], &got[6]), (&want[0], &want[1], &want[2]));
        assert!(!got[8].is_empty(), "evidence shown");
    }
    let shot = screenshot(&run_url, "run");
    eprintln!("screenshot: {}", shot.display());

    // Search by agent.
    let agent = want.keys().next().expect("an agent").clone();
    let dom = dump_dom(&format!("{}/search?agent={agent}", ui.base));
    let found = table_rows(&dom, "results");
    let n = sql_rows(
        &cfg,
        &format!("SELECT count() FROM runs FINAL WHERE agent_name = '{agent}'"),
    )
    .await;
    assert_eq!(
        found.len() as f64,
        num(&n[0][0]).min(100.0),
        "search {agent}"
    );
    assert!(found.iter().all(|(_, c)| c[2] == agent));
    screenshot(&format!("{}/search?agent={agent}", ui.base), "search");

    // Live: subscribe, then run a second fleet through the worker; its signals stream in.
    let addr = ui.addr.clone();
    let mut sse = std::net::TcpStream::connect(&addr).expect("connect to eddy ui");
    sse.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    write!(
        sse,
        "GET /live/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\
         Authorization: Bearer {TOKEN}\r\n\r\n"
    )
    .expect("request");
    let mut got = String::new();
    let mut buf = [0u8; 8192];
    let start = Instant::now();
    while !got.contains("\r\n\r\n") {
        assert!(start.elapsed() < Duration::from_secs(10), "no SSE headers");
        if let Ok(n) = sse.read(&mut buf) {
            got.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    assert!(got.contains("text/event-stream"), "{got}");
    let second = Fleet::new(&cfg, 10, 3232, 1);
    let new_runs: Vec<String> = second
        .want
        .values()
        .filter(|o| !matches!(o, eddy::contract::OutputEvent::RunTerminated(_)))
        .map(|o| o.run_id().to_string())
        .collect();
    assert!(!new_runs.is_empty(), "the second fleet loops");
    produce(&cfg, &second.lines).await;
    let start = Instant::now();
    while !new_runs.iter().any(|r| got.contains(r.as_str())) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no signal of the second fleet on /live/events: {got}"
        );
        if let Ok(n) = sse.read(&mut buf) {
            got.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    assert!(got.contains("event: signal"), "{got}");
    let live_dom = dump_dom(&format!("{}/live", ui.base));
    assert!(live_dom.contains("<table id=\"live\""));
}
