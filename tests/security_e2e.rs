//! Kafka SASL (SCRAM-SHA-512 and PLAIN) over TLS and ClickHouse over HTTPS with a password, end
//! to end against real servers: the `eddy run` binary, secrets given only through the
//! environment, a looping fleet in, signals out and rows in ClickHouse. And the mistakes an
//! operator makes (a wrong password, a missing CA) stop the worker at once with a message that
//! names the setting to fix and never the secret.
//!
//! The secured endpoints come from `scripts/stack env` (`EDDY_TEST_*`, see `Secured::from_env`);
//! without them the tests fail with instructions.
mod common;

use common::*;
use eddy::config::Config;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The secured endpoints and test credentials `scripts/stack` serves.
struct Secured {
    sasl_ssl_brokers: String,
    scram_user: String,
    scram_password: String,
    plain_user: String,
    plain_password: String,
    ca_file: String,
    clickhouse_https: String,
    clickhouse_user: String,
    clickhouse_password: String,
}

impl Secured {
    fn from_env() -> Self {
        let var = |name: &str| {
            std::env::var(name).unwrap_or_else(|_| {
                panic!(
                    "{name} is not set: these tests need the secured Kafka listener and \
                     ClickHouse HTTPS port of scripts/stack. Run `eval \"$(scripts/stack up)\"` \
                     (or scripts/test), which exports EDDY_TEST_KAFKA_SASL_SSL_BROKERS, \
                     EDDY_TEST_CA_FILE, EDDY_TEST_CLICKHOUSE_HTTPS_URL and the test credentials; \
                     with a stack started by an older script, run `scripts/stack restart-kafka` \
                     and `scripts/stack stop-clickhouse && scripts/stack start-clickhouse` first"
                )
            })
        };
        Self {
            sasl_ssl_brokers: var("EDDY_TEST_KAFKA_SASL_SSL_BROKERS"),
            scram_user: var("EDDY_TEST_KAFKA_SCRAM_USER"),
            scram_password: var("EDDY_TEST_KAFKA_SCRAM_PASSWORD"),
            plain_user: var("EDDY_TEST_KAFKA_PLAIN_USER"),
            plain_password: var("EDDY_TEST_KAFKA_PLAIN_PASSWORD"),
            ca_file: var("EDDY_TEST_CA_FILE"),
            clickhouse_https: var("EDDY_TEST_CLICKHOUSE_HTTPS_URL"),
            clickhouse_user: var("EDDY_TEST_CLICKHOUSE_USER"),
            clickhouse_password: var("EDDY_TEST_CLICKHOUSE_PASSWORD"),
        }
    }

    /// A unique test config on the secured endpoints, with the same credentials the worker gets
    /// (this process produces, reads and counts through them too).
    fn config(&self, ep: &Endpoints, name: &str, mechanism: &str) -> Config {
        let (user, password) = self.kafka_credentials(mechanism);
        let mut cfg = test_config(ep, name);
        let kafka = &mut cfg.kafka;
        kafka.brokers = self.sasl_ssl_brokers.clone();
        kafka.security_protocol = Some("SASL_SSL".into());
        kafka.sasl_mechanism = Some(mechanism.into());
        kafka.sasl_username = Some(user.into());
        kafka.sasl_password = Some(password.into());
        kafka.ssl_ca_location = Some(self.ca_file.clone());
        kafka.topics.partitions = 2;
        let ch = &mut cfg.clickhouse;
        ch.url = self.clickhouse_https.clone();
        ch.user = Some(self.clickhouse_user.clone());
        ch.password = Some(self.clickhouse_password.clone());
        ch.ca_file = Some(self.ca_file.clone());
        cfg
    }

    fn kafka_credentials(&self, mechanism: &str) -> (&str, &str) {
        if mechanism == "PLAIN" {
            (&self.plain_user, &self.plain_password)
        } else {
            (&self.scram_user, &self.scram_password)
        }
    }
}

/// Everything security-related for the worker, as environment variables only.
fn security_env(cfg: &Config) -> Vec<(&'static str, String)> {
    let pairs = [
        ("EDDY_KAFKA_SECURITY_PROTOCOL", &cfg.kafka.security_protocol),
        ("EDDY_KAFKA_SASL_MECHANISM", &cfg.kafka.sasl_mechanism),
        ("EDDY_KAFKA_SASL_USERNAME", &cfg.kafka.sasl_username),
        ("EDDY_KAFKA_SASL_PASSWORD", &cfg.kafka.sasl_password),
        ("EDDY_KAFKA_SSL_CA_LOCATION", &cfg.kafka.ssl_ca_location),
        ("EDDY_CLICKHOUSE_USER", &cfg.clickhouse.user),
        ("EDDY_CLICKHOUSE_PASSWORD", &cfg.clickhouse.password),
        ("EDDY_CLICKHOUSE_CA_FILE", &cfg.clickhouse.ca_file),
    ];
    pairs
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect()
}

/// Poll a count over the secured ClickHouse connection (HTTPS, user and password, the stack
/// CA) until it equals `want` or `timeout` passes; returns the last count.
async fn await_secure_count(cfg: &Config, sql: &str, want: u64, timeout: Duration) -> u64 {
    let sink = eddy::sink::ClickHouseSink::connect(&cfg.clickhouse)
        .await
        .expect("connect to ClickHouse over HTTPS with user and password");
    let sql = sql.replace("{db}", &cfg.clickhouse.database);
    let start = Instant::now();
    loop {
        let got = sink.client().query(&sql).fetch_one::<u64>().await.ok();
        if got == Some(want) || start.elapsed() > timeout {
            return got.unwrap_or(0);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A small looping fleet through a worker on SASL_SSL (`mechanism`) and ClickHouse HTTPS.
async fn fleet_end_to_end(mechanism: &str, name: &str) {
    let sec = Secured::from_env();
    let ep = endpoints().await;
    let cfg = sec.config(&ep, name, mechanism);
    let fleet = Fleet::new(&cfg, 40, 77, 2);
    assert!(fleet.signals() > 0, "the fleet loops: signals expected");
    // Topics are created and the fleet produced over SASL_SSL by this process.
    produce(&cfg, &fleet.lines).await;

    let mut worker = spawn_worker(&cfg, &security_env(&cfg));
    let got = read_all_expected(
        &cfg,
        &fleet.want,
        Duration::from_secs(120),
        Some(&mut worker),
    );
    let dupes = assert_exact_or_duplicate(&got, &fleet.want);
    assert_eq!(dupes, 0, "no crash, so no duplicates");

    let t = Duration::from_secs(60);
    let steps = await_secure_count(&cfg, "SELECT count() FROM {db}.steps FINAL", fleet.steps, t);
    assert_eq!(steps.await, fleet.steps, "step rows in ClickHouse");
    let signals = await_secure_count(
        &cfg,
        "SELECT count() FROM {db}.signals FINAL",
        fleet.signals(),
        t,
    );
    assert_eq!(signals.await, fleet.signals(), "signal rows in ClickHouse");
    let runs = await_secure_count(
        &cfg,
        "SELECT count() FROM {db}.runs FINAL",
        fleet.runs as u64,
        t,
    );
    assert_eq!(runs.await, fleet.runs as u64, "run rows in ClickHouse");
    stop_gracefully(&mut worker);
    eprintln!(
        "{mechanism} over SASL_SSL, ClickHouse over HTTPS: {} input events, {} output events, \
         {} steps and {} signals in ClickHouse",
        fleet.lines.len(),
        got.len(),
        fleet.steps,
        fleet.signals()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha_512_over_tls_and_clickhouse_https() {
    fleet_end_to_end("SCRAM-SHA-512", "sec_scram").await;
}

/// PLAIN, and this time the non-secret settings come from a config file's client tables, as
/// most deployments write them; the secrets still come from the environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_over_tls_with_settings_from_file_and_secrets_from_env() {
    let sec = Secured::from_env();
    let ep = endpoints().await;
    let cfg = sec.config(&ep, "sec_plain", "PLAIN");
    let fleet = Fleet::new(&cfg, 30, 78, 2);
    produce(&cfg, &fleet.lines).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("eddy.toml");
    let mut toml = String::new();
    for table in ["kafka_consumer", "kafka_producer"] {
        toml.push_str(&format!(
            "[{table}]\n\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"PLAIN\"\n\
             \"sasl.username\" = \"{}\"\n\"ssl.ca.location\" = \"{}\"\n",
            sec.plain_user, sec.ca_file
        ));
    }
    std::fs::write(&file, toml).expect("write config");
    let env = vec![
        ("EDDY_CONFIG", file.display().to_string()),
        ("EDDY_KAFKA_SASL_PASSWORD", sec.plain_password.clone()),
        ("EDDY_CLICKHOUSE_USER", sec.clickhouse_user.clone()),
        ("EDDY_CLICKHOUSE_PASSWORD", sec.clickhouse_password.clone()),
        ("EDDY_CLICKHOUSE_CA_FILE", sec.ca_file.clone()),
    ];
    let mut worker = spawn_worker(&cfg, &env);
    let got = read_all_expected(
        &cfg,
        &fleet.want,
        Duration::from_secs(120),
        Some(&mut worker),
    );
    assert_eq!(assert_exact_or_duplicate(&got, &fleet.want), 0);
    let t = Duration::from_secs(60);
    assert_eq!(
        await_secure_count(
            &cfg,
            "SELECT count() FROM {db}.signals FINAL",
            fleet.signals(),
            t
        )
        .await,
        fleet.signals()
    );
    assert_eq!(
        await_secure_count(&cfg, "SELECT count() FROM {db}.steps FINAL", fleet.steps, t).await,
        fleet.steps
    );
    stop_gracefully(&mut worker);
}

/// What a failed start printed, and how it ended.
struct Failed {
    status: std::process::ExitStatus,
    output: String,
}

/// Run `eddy run` with `env` on top of the test config's names; it must exit by itself within
/// `timeout` (a misconfigured worker must not hang retrying).
fn run_until_exit(cfg: &Config, env: &[(&str, String)], timeout: Duration) -> Failed {
    let mut cmd = run_command(cfg);
    // Debug: the secret must not show up even in the most talkative logs.
    cmd.env("EDDY_LOG", "debug")
        .env("NO_COLOR", "1")
        .env("EDDY_TOPIC_PARTITIONS", "1")
        .env("EDDY_SHUTDOWN_GRACE_MS", "2000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn eddy run");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let (mut out, mut err) = (
        child.stdout.take().expect("stdout"),
        child.stderr.take().expect("stderr"),
    );
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        let _ = err.read_to_string(&mut s);
        let _ = tx.send((child.wait(), s));
    });
    match rx.recv_timeout(timeout) {
        Ok((status, output)) => Failed {
            status: status.expect("wait for eddy run"),
            output,
        },
        Err(_) => {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            let output = rx.recv().map(|(_, o)| o).unwrap_or_default();
            panic!("eddy run was still running after {timeout:?}, instead of failing:\n{output}")
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_or_missing_credentials_stop_the_worker_with_advice_and_no_secret() {
    const WRONG: &str = "wrong-SECRET-5z8";
    let sec = Secured::from_env();
    let ep = endpoints().await;
    let cfg = sec.config(&ep, "sec_neg", "SCRAM-SHA-512");
    let base = security_env(&cfg);
    let with = |k: &'static str, v: &str| {
        let mut env: Vec<(&str, String)> = base.iter().filter(|(n, _)| *n != k).cloned().collect();
        env.push((k, v.to_string()));
        env
    };
    // (case, environment, what the message must say, secrets it must not contain)
    let cases = [
        (
            "wrong SCRAM password",
            with("EDDY_KAFKA_SASL_PASSWORD", WRONG),
            vec![
                "refused the connection",
                "Authentication failed",
                "user `eddy_scram`",
                "EDDY_KAFKA_SASL_PASSWORD",
            ],
        ),
        (
            "wrong PLAIN password",
            [
                with("EDDY_KAFKA_SASL_PASSWORD", WRONG),
                vec![
                    ("EDDY_KAFKA_SASL_MECHANISM", "PLAIN".to_string()),
                    ("EDDY_KAFKA_SASL_USERNAME", sec.plain_user.clone()),
                ],
            ]
            .concat(),
            vec![
                "refused the connection",
                "mechanism PLAIN",
                "EDDY_KAFKA_SASL_PASSWORD",
            ],
        ),
        (
            "no CA for the broker's certificate",
            with(
                "EDDY_KAFKA_SSL_CA_LOCATION",
                "/etc/ssl/certs/ca-certificates.crt",
            ),
            vec!["certificate verify failed", "EDDY_KAFKA_SSL_CA_LOCATION"],
        ),
        (
            "wrong ClickHouse password",
            with("EDDY_CLICKHOUSE_PASSWORD", WRONG),
            vec![
                "rejected user `eddy_secure`",
                "Wrong password",
                "EDDY_CLICKHOUSE_PASSWORD",
            ],
        ),
        (
            "no CA for ClickHouse's certificate",
            base.iter()
                .filter(|(n, _)| *n != "EDDY_CLICKHOUSE_CA_FILE")
                .cloned()
                .collect(),
            vec!["TLS failed", "EDDY_CLICKHOUSE_CA_FILE"],
        ),
    ];
    let secrets = [
        WRONG,
        sec.scram_password.as_str(),
        sec.plain_password.as_str(),
        sec.clickhouse_password.as_str(),
    ];
    for (case, env, must_say) in cases {
        let started = Instant::now();
        let r = run_until_exit(&cfg, &env, Duration::from_secs(60));
        let out = &r.output;
        assert!(
            !r.status.success(),
            "{case}: exit status {}:\n{out}",
            r.status
        );
        let error = out
            .lines()
            .find(|l| l.starts_with("Error: "))
            .unwrap_or_else(|| panic!("{case}: no `Error:` line:\n{out}"));
        for phrase in must_say {
            assert!(
                error.contains(phrase),
                "{case}: the error does not say `{phrase}`:\n{error}"
            );
        }
        for secret in secrets {
            assert!(
                !out.contains(secret),
                "{case}: a secret was printed:\n{out}"
            );
        }
        eprintln!(
            "{case}: exited {} after {:.1}s: {error}",
            r.status,
            started.elapsed().as_secs_f64()
        );
    }
}
