//! Two ClickHouse generations, one answer. A simulated fleet goes through the engine and eddy's
//! own row encoders, as the worker does it; the same batches are inserted
//! - into the real 18.16 server (legacy DDL, via `ClickHouseSink::connect` + `migrate`), and
//! - into a recording HTTP server, which keeps the RowBinary bodies eddy's sink sends.
//!
//! `scripts/check-modern-clickhouse` then applies the modern DDL on a current engine (chdb,
//! ClickHouse 26.x in-process), loads those bodies with `file(..., 'RowBinary', ...)`, and runs
//! every pack query with the same bound parameters. Every cell must match the 18.16 answer.
//! Normalised: floats that print differently but are equal to 1e-9 relative (counted and shown).
//! Nothing else: table dumps render `ts_ms`/`ended_ms` as epoch milliseconds on both sides (they
//! are Int64 on 18.16 and DateTime64(3) on the modern form) and fingerprints as hex.
mod common;

use common::*;
use eddy::contract::{decode, Event};
use eddy::engine::{partition_for, Outcome, PartitionEngine};
use eddy::query::Table;
use eddy::sink::rows::{push_output, Origin, RollupRow};

const TABLES: [&str; 4] = ["steps", "signals", "runs", "rollup_minute"];
use eddy::sink::{Batch, ClickHouseSink, DdlOptions, StepRow};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

const T0: i64 = 1_767_225_600_000;
const PARTITIONS: u32 = 3;
const MODERN: &str = "26.9.2.1";

/// The fleet, through one engine per partition, rows built as `worker::serve` builds them.
fn fixture() -> (Batch, Vec<String>) {
    let sim = eddy::simulate::SimulateArgs {
        runs: 300,
        loop_rate: 0.35,
        seed: 11,
        projects: 2,
        start_ms: T0,
        out: None,
        unfinished_rate: 0.0,
        ..Default::default()
    };
    let cfg = Arc::new(eddy::config::Config::default().engine);
    let mut engines: Vec<PartitionEngine> = (0..PARTITIONS)
        .map(|_| PartitionEngine::new(cfg.clone()).with_rollups())
        .collect();
    let mut offsets = vec![0i64; PARTITIONS as usize];
    let mut batch = Batch::default();
    let mut outs = Vec::new();
    let mut runs = Vec::new();
    for (_, _, line) in eddy::simulate::generate(&sim) {
        let ev = decode(line.as_bytes()).expect("simulated events decode");
        let p = partition_for(&ev.key().run_id, PARTITIONS);
        let src = Origin {
            partition: p as i32,
            offset: offsets[p as usize],
        };
        offsets[p as usize] += 1;
        let outcome = engines[p as usize].apply(&ev, &mut outs);
        if let (Event::Step(step), Outcome::Step(fps)) = (&ev, &outcome) {
            batch.steps.push(StepRow::new(step, fps, src));
        }
        for o in outs.drain(..) {
            push_output(&mut batch, &o, src);
        }
        let closed = engines[p as usize].take_rollups();
        batch
            .rollups
            .extend(closed.map(|c| RollupRow::new(&c, src)));
        if ev.key().project_id == "proj-0" && !runs.contains(&ev.key().run_id) {
            runs.push(ev.key().run_id.clone());
        }
    }
    assert!(
        !batch.steps.is_empty()
            && !batch.signals.is_empty()
            && !batch.runs.is_empty()
            && !batch.rollups.is_empty()
    );
    (batch, runs)
}

/// The last third of every table again: a flush replayed after a crash (same rows, same
/// versions), which both generations must collapse under FINAL.
fn replayed(b: &Batch) -> Batch {
    let tail = |n: usize| n - n / 3;
    Batch {
        steps: b.steps[tail(b.steps.len())..].to_vec(),
        signals: b.signals[tail(b.signals.len())..].to_vec(),
        runs: b.runs[tail(b.runs.len())..].to_vec(),
        rollups: b.rollups[tail(b.rollups.len())..].to_vec(),
    }
}

// ------------------------------------------------------------------ recording ClickHouse

/// Per table: the INSERT's column list and every body received, concatenated.
type Recorded = Arc<Mutex<BTreeMap<String, (String, Vec<u8>)>>>;

/// A minimal ClickHouse HTTP endpoint: answers `SELECT version()` (RowBinary String) and
/// records INSERT bodies. Enough for `ClickHouseSink::insert` with compression off.
fn recording_server() -> (String, Recorded) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let rec: Recorded = Arc::default();
    let r = rec.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let r = r.clone();
            std::thread::spawn(move || serve(conn, &r));
        }
    });
    (url, rec)
}

fn serve(conn: TcpStream, rec: &Recorded) {
    let mut out = conn.try_clone().expect("clone");
    let mut rd = BufReader::new(conn);
    loop {
        let mut start = String::new();
        if rd.read_line(&mut start).unwrap_or(0) == 0 {
            return;
        }
        let target = start.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            rd.read_line(&mut h).expect("header");
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let mut body = Vec::new();
        if headers
            .get("transfer-encoding")
            .is_some_and(|t| t.contains("chunked"))
        {
            loop {
                let mut size = String::new();
                rd.read_line(&mut size).expect("chunk size");
                let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                    .expect("chunk size is hex");
                let mut chunk = vec![0; n + 2];
                rd.read_exact(&mut chunk).expect("chunk");
                body.extend_from_slice(&chunk[..n]);
                if n == 0 {
                    break;
                }
            }
        } else if let Some(n) = headers.get("content-length") {
            let mut b = vec![0; n.parse().expect("content-length")];
            rd.read_exact(&mut b).expect("body");
            body = b;
        }
        let params = query_params(&target);
        let response: Vec<u8> = match params.get("query") {
            Some(q) if q.starts_with("INSERT INTO ") => {
                let rest = &q["INSERT INTO ".len()..];
                let (table, cols) = rest.split_once('(').expect("INSERT INTO t(cols)");
                let table = table.rsplit('.').next().unwrap_or(table).to_string();
                let cols = cols
                    .split(')')
                    .next()
                    .unwrap_or_default()
                    .replace([' ', '`'], "");
                let mut m = rec.lock().expect("lock");
                let e = m.entry(table).or_insert_with(|| (cols.clone(), Vec::new()));
                assert_eq!(e.0, cols, "one column list per table");
                e.1.extend_from_slice(&body);
                Vec::new()
            }
            _ if String::from_utf8_lossy(&body).contains("version()") => {
                let mut v = vec![MODERN.len() as u8];
                v.extend_from_slice(MODERN.as_bytes());
                v
            }
            _ => Vec::new(),
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            response.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(&response).is_err() {
            return;
        }
    }
}

fn query_params(target: &str) -> HashMap<String, String> {
    let q = target.split_once('?').map(|(_, q)| q).unwrap_or_default();
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (pct_decode(k), pct_decode(v)))
        .collect()
}

fn pct_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let v = u8::from_str_radix(&s[i + 1..i + 3], 16).expect("percent escape");
                out.push(v);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).expect("utf-8 query")
}

// ------------------------------------------------------------------ queries on both

/// The pack, each query with its bound parameters: (key, query name, parameters).
fn pack_calls(runs: &[String]) -> Vec<(String, &'static str, BTreeMap<String, String>)> {
    let mut calls = Vec::new();
    let windows = [
        ("day", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"),
        // A window whose previous one has runs too (summary's prev_* columns).
        ("min2", "2026-01-01T00:02:00Z", "2026-01-01T00:04:00Z"),
    ];
    for project in ["proj-0", "proj-1"] {
        for (w, from, to) in windows {
            for name in eddy::query::names() {
                let mut p = BTreeMap::new();
                let declared = eddy::query::params(eddy::query::sql_for(name, MODERN).unwrap());
                for (k, _) in &declared {
                    let v = match k.as_str() {
                        "project_id" => project,
                        "from" => from,
                        "to" => to,
                        "bucket_seconds" => "120",
                        _ => continue,
                    };
                    p.insert(k.clone(), v.to_string());
                }
                if declared.iter().any(|(k, _)| k == "run_id") {
                    continue;
                }
                calls.push((format!("{name}.{project}.{w}"), name, p));
            }
        }
    }
    for run in runs.iter().take(30) {
        let p = [("project_id", "proj-0"), ("run_id", run.as_str())]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        calls.push((format!("run_loops.{run}"), "run_loops", p));
    }
    calls
}

/// Every column of every row, FINAL, in identity order: proves the bytes decode to the same
/// values under both DDL forms.
fn dumps(desc: &[(String, String)], table: &str, modern: bool) -> String {
    let key = match table {
        "steps" => "project_id, run_id, step_index",
        "signals" => "project_id, run_id, event_id",
        "rollup_minute" => "project_id, bucket, run_id",
        _ => "project_id, run_id",
    };
    let cols: Vec<String> = desc
        .iter()
        .map(|(c, ty)| {
            if ty.starts_with("FixedString") {
                format!("hex({c}) AS {c}")
            } else if modern && (c == "ts_ms" || c == "ended_ms") {
                format!("toUnixTimestamp64Milli({c}) AS {c}")
            } else {
                c.clone()
            }
        })
        .collect();
    format!(
        "SELECT {} FROM {table} FINAL ORDER BY {key}",
        cols.join(", ")
    )
}

async fn fetch_tsv(client: &clickhouse::Client, sql: &str) -> Table {
    let bytes = client
        .query(&format!("{sql} FORMAT TabSeparatedWithNames"))
        .fetch_bytes("TabSeparatedWithNames")
        .expect("query")
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    eddy::query::parse_tsv(&String::from_utf8_lossy(&bytes))
}

/// Cells equal, or floats printed differently that agree to 1e-9 relative.
fn same_cell(a: &str, b: &str) -> Option<bool> {
    if a == b {
        return Some(true);
    }
    let (x, y) = (a.parse::<f64>().ok()?, b.parse::<f64>().ok()?);
    ((x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)).then_some(false)
}

fn write(path: &Path, text: &str) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_clickhouse_answers_like_18_16() {
    // Fail, never skip, without the modern engine.
    let py = Command::new("python3")
        .args(["-c", "import chdb"])
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 is required for the modern ClickHouse check (chdb): {e}")
        });
    assert!(
        py.status.success(),
        "the modern ClickHouse check needs chdb (ClickHouse in-process): `pip install chdb`\n{}",
        String::from_utf8_lossy(&py.stderr)
    );

    let (batch, runs) = fixture();
    let again = replayed(&batch);

    // 1. eddy's RowBinary, captured by the recording server (compression off: plain bodies).
    let (url, rec) = recording_server();
    let rec_cfg = eddy::config::ClickHouseConfig {
        url: url.clone(),
        ..Default::default()
    };
    let client = clickhouse::Client::default()
        .with_url(&url)
        .with_validation(false)
        .with_compression(clickhouse::Compression::None);
    let recorder = ClickHouseSink::from_client(client, &rec_cfg);
    assert_eq!(recorder.version().await.expect("version"), MODERN);
    recorder.insert(&batch).await.expect("insert (recorded)");
    recorder
        .insert(&again)
        .await
        .expect("replayed insert (recorded)");

    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    {
        let rec = rec.lock().expect("lock");
        for t in TABLES {
            let (cols, body) = rec.get(t).unwrap_or_else(|| panic!("no INSERT into {t}"));
            std::fs::write(d.join(format!("{t}.rowbinary")), body).expect("write rows");
            write(&d.join(format!("{t}.columns")), cols);
        }
    }

    // 2. The same batches into the real 18.16 server, through the normal sink.
    let ep = endpoints().await;
    let cfg = test_config(&ep, "modern_ch");
    let sink = ClickHouseSink::connect(&cfg.clickhouse)
        .await
        .expect("connect");
    let old_version = sink.version().await.expect("version");
    assert!(
        !eddy::sink::is_modern(&old_version),
        "this test compares the legacy DDL on the old server with the modern one in chdb; \
         EDDY_CLICKHOUSE_URL runs {old_version}"
    );
    let migrations = eddy::sink::DdlOptions::new(&cfg.clickhouse, Some(&old_version))
        .migrations()
        .len();
    assert_eq!(sink.migrate().await.expect("migrate").len(), migrations);
    assert!(sink.migrate().await.expect("migrate again").is_empty());
    sink.insert(&batch).await.expect("insert");
    sink.insert(&again).await.expect("replayed insert");
    let old = clickhouse(&cfg).with_database(&cfg.clickhouse.database);

    // 3. What chdb runs: the modern DDL as `eddy migrate` renders it, and the bound pack.
    let modern = |retention_days, db: &str| DdlOptions {
        db: db.into(),
        modern: true,
        cluster: None,
        retention_days,
    };
    write(&d.join("ddl.sql"), &modern(0, "eddy").script());
    write(&d.join("ddl_ttl.sql"), &modern(30, "eddy_ttl").script());
    let printed = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["migrate", "--print"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("EDDY_CLICKHOUSE_CLUSTER", "eddy_cluster")
        .env("EDDY_CLICKHOUSE_RETENTION_DAYS", "30")
        .output()
        .expect("eddy migrate --print");
    assert!(printed.status.success(), "{printed:?}");
    let cluster_ddl = String::from_utf8(printed.stdout).expect("utf-8");
    assert!(cluster_ddl.contains("ReplicatedReplacingMergeTree") && cluster_ddl.contains("TTL "));
    write(&d.join("ddl_cluster.sql"), &cluster_ddl);

    let calls = pack_calls(&runs);
    let mut want: Vec<(String, Table)> = Vec::new();
    for (key, name, params) in &calls {
        let sql = eddy::query::sql_for(name, MODERN).expect("query");
        let bound = eddy::query::bind(name, sql, params).expect("bind");
        write(&d.join("queries").join(format!("{key}.sql")), &bound);
        let t = eddy::query::execute(&old, name, params)
            .await
            .unwrap_or_else(|e| panic!("{key} on {old_version}: {e}"));
        want.push((key.clone(), t));
    }
    for t in TABLES {
        let desc: Vec<(String, String)> = fetch_tsv(&old, &format!("DESCRIBE TABLE {t}"))
            .await
            .rows
            .into_iter()
            .map(|r| (r[0].clone(), r[1].clone()))
            .collect();
        write(
            &d.join("queries").join(format!("dump.{t}.sql")),
            &dumps(&desc, t, true),
        );
        want.push((
            format!("dump.{t}"),
            fetch_tsv(&old, &dumps(&desc, t, false)).await,
        ));
    }

    // 4. The modern engine.
    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-modern-clickhouse"))
        .arg(d)
        .output()
        .expect("run scripts/check-modern-clickhouse");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() != Some(2),
        "chdb is missing: `pip install chdb`\n{stderr}"
    );
    assert!(
        out.status.success(),
        "scripts/check-modern-clickhouse failed ({}):\n{stderr}\n{}",
        out.status,
        stdout.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    eprintln!("{}", stdout.lines().take(8).collect::<Vec<_>>().join("\n"));

    // 5. Cell by cell.
    let mut problems = Vec::new();
    let (mut cells, mut normalised) = (0usize, Vec::new());
    let (mut loops_seen, mut empty_seen) = (false, false);
    for (key, old_t) in &want {
        let path = d.join("results").join(format!("{key}.tsv"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let new_t = eddy::query::parse_tsv(&text);
        if key.starts_with("run_loops.") {
            loops_seen |= !old_t.rows.is_empty();
            empty_seen |= old_t.rows.is_empty();
        }
        if old_t.columns != new_t.columns {
            problems.push(format!(
                "{key}: columns {:?} (18.16) vs {:?} (modern)",
                old_t.columns, new_t.columns
            ));
            continue;
        }
        if old_t.rows.len() != new_t.rows.len() {
            problems.push(format!(
                "{key}: {} rows (18.16) vs {} rows (modern)",
                old_t.rows.len(),
                new_t.rows.len()
            ));
            continue;
        }
        for (i, (a, b)) in old_t.rows.iter().zip(&new_t.rows).enumerate() {
            for (j, (x, y)) in a.iter().zip(b).enumerate() {
                cells += 1;
                match same_cell(x, y) {
                    Some(true) => {}
                    Some(false) => {
                        normalised.push(format!("{key} row {i} {}: {x} vs {y}", old_t.columns[j]))
                    }
                    None => problems.push(format!(
                        "{key} row {i} column {}: `{x}` (18.16) vs `{y}` (modern)",
                        old_t.columns[j]
                    )),
                }
            }
        }
    }
    eprintln!(
        "{} result sets, {cells} cells compared between {old_version} and the modern engine (chdb); \
         {} equal only after float normalisation{}",
        want.len(),
        normalised.len(),
        normalised
            .iter()
            .take(10)
            .map(|n| format!("\n  {n}"))
            .collect::<String>()
    );
    assert!(
        problems.is_empty(),
        "{} differences between ClickHouse {old_version} and the modern engine:\n{}",
        problems.len(),
        problems
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        loops_seen && empty_seen,
        "run_loops covered runs with and without loops"
    );
    let steps = &want
        .iter()
        .find(|(k, _)| k == "dump.steps")
        .expect("dump")
        .1;
    assert_eq!(
        steps.rows.len(),
        batch.steps.len(),
        "FINAL collapsed the replayed flush"
    );
}
