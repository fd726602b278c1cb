//! Start-up for a user whose ClickHouse account may not run DDL (`migrate_on_start = false`):
//! the worker refuses to start on tables nobody created, naming what to run; once an
//! administrator ran `eddy migrate`, the same worker starts and its verdicts reach ClickHouse.
mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `eddy migrate` with the same endpoints and database as the worker.
fn migrate(cfg: &eddy::config::Config) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_eddy"))
        .arg("migrate")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("EDDY_CLICKHOUSE_URL", &cfg.clickhouse.url)
        .env("EDDY_CLICKHOUSE_DATABASE", &cfg.clickhouse.database)
        .stdin(Stdio::null())
        .output()
        .expect("run eddy migrate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ddl_rights_the_worker_waits_for_eddy_migrate() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "startup");

    // 1. Nothing migrated: the worker stops at once and says what to do.
    let out = run_command(&cfg)
        .env("EDDY_MIGRATE_ON_START", "false")
        .env("EDDY_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run eddy run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started without tables: {stderr}");
    assert!(
        stderr.contains("eddy migrate") && stderr.contains("0001_core_tables"),
        "the error must name the missing migrations and the command: {stderr}"
    );
    // And it created nothing in ClickHouse on its own.
    let dbs = ch_count(
        &cfg,
        &format!(
            "SELECT count() FROM system.databases WHERE name = '{}'",
            cfg.clickhouse.database
        ),
    )
    .await;
    assert_eq!(dbs, 0, "a worker without migrate_on_start must not run DDL");

    // 2. An administrator migrates; the same worker now starts and writes its rows.
    let m = migrate(&cfg);
    assert!(
        m.status.success(),
        "eddy migrate: {}",
        String::from_utf8_lossy(&m.stderr)
    );
    let mut worker = spawn_worker(&cfg, &[("EDDY_MIGRATE_ON_START", "false".into())]);
    let fleet = Fleet::new(&cfg, 20, 11, 1);
    produce(&cfg, &fleet.lines).await;
    let runs = await_ch_count(
        &cfg,
        "SELECT count() FROM {db}.runs FINAL",
        20,
        Duration::from_secs(90),
    )
    .await;
    assert!(
        worker.try_wait().expect("worker status").is_none(),
        "the worker exited"
    );
    assert_eq!(runs, 20, "every run of the fleet reached ClickHouse");
    let signals = await_ch_count(
        &cfg,
        "SELECT count() FROM {db}.signals FINAL",
        fleet.signals(),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(signals, fleet.signals(), "the offline replay's signals");
}
