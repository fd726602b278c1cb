//! Every ClickHouse panel query of the Grafana dashboards (deploy/grafana/dashboards), with the
//! plugin's time macros expanded, runs on Debian's ClickHouse 18.16 (the stack's server) and on a
//! current ClickHouse (chdb) with the same rows and answers: `scripts/check-grafana` does it;
//! this test runs it against the test endpoints with this build's eddy.
mod common;

use std::path::Path;
use std::process::Command;

#[tokio::test]
async fn dashboard_queries_run_on_both_clickhouse_generations() {
    let ep = common::endpoints().await;
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-grafana"))
        .args(["--eddy", env!("CARGO_BIN_EXE_eddy")])
        .env("EDDY_CLICKHOUSE_URL", &ep.clickhouse)
        .output()
        .expect("run scripts/check-grafana (python3)");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_ne!(
        out.status.code(),
        Some(2),
        "chdb is missing: `pip install chdb`\n{stderr}"
    );
    assert!(
        out.status.success(),
        "scripts/check-grafana failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    assert!(
        stdout.contains("panel queries ran on ClickHouse"),
        "{stdout}"
    );
}
