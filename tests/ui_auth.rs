//! `eddy ui` lets no one in without a token or a trusted proxy's user, against the real servers:
//! a real `eddy ui` process over a migrated ClickHouse database and a Kafka output topic.
//!
//! That a turned-away request runs no query is shown with a database that makes every query
//! fail: once it is dropped, the right token gets 503 and a page that names the missing
//! database and how to fix it (its queries fail), while every request
//! without the right credentials still gets 401 with no page, no stream and no error text.
//! The proxy's user header is sent from two loopback addresses (127.0.0.2 is the trusted
//! proxy, 127.0.0.1 is not), so the peer address is really the one the kernel reports.
mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "ui-auth-test-token-7f3a9c51";
const OTHER_TOKEN: &str = "second-token-for-rotation-02";

struct Ui {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ui_command(cfg: &eddy::config::Config, env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_eddy"));
    cmd.arg("ui")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("EDDY_LOG", "warn,eddy=info")
        .env("EDDY_KAFKA_BROKERS", &cfg.kafka.brokers)
        .env("EDDY_CLICKHOUSE_URL", &cfg.clickhouse.url)
        .env("EDDY_CLICKHOUSE_DATABASE", &cfg.clickhouse.database)
        .env("EDDY_OUTPUT_TOPIC", &cfg.kafka.topics.output);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn start_ui(cfg: &eddy::config::Config, env: &[(&str, &str)], args: &[&str]) -> Ui {
    let mut child = ui_command(cfg, env, args)
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
        .parse()
        .expect("address");
    Ui { child, addr }
}

/// A database with eddy's tables and the output topic the live page reads.
async fn prepare(name: &str) -> eddy::config::Config {
    let ep = endpoints().await;
    let cfg = test_config(&ep, name);
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("create topics");
    let sink = eddy::sink::ClickHouseSink::connect(&cfg.clickhouse)
        .await
        .expect("ClickHouse");
    sink.migrate().await.expect("migrate");
    cfg
}

async fn drop_database(cfg: &eddy::config::Config) {
    clickhouse(cfg)
        .query(&format!("DROP DATABASE {}", cfg.clickhouse.database))
        .execute()
        .await
        .expect("drop database");
}

struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Vec<&str> {
        self.head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
            .collect()
    }
}

/// One HTTP/1.1 GET from the local address `from`. A stream (`text/event-stream`) is read
/// until its headers only; anything else to its end.
async fn get(from: &str, to: SocketAddr, path: &str, headers: &[(&str, String)]) -> Answer {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{from}:0").parse().expect("from"))
        .expect("bind the client address");
    let mut s = sock.connect(to).await.expect("connect to eddy ui");
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {to}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let n = match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => panic!("GET {path}: {e}"),
            Err(_) => panic!("GET {path}: no complete answer within 30 s"),
        };
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        let streaming = text
            .split("\r\n\r\n")
            .next()
            .is_some_and(|h| h.contains("text/event-stream"));
        if n == 0 || (streaming && text.contains("\r\n\r\n")) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("GET {path}: not HTTP: {text:?}"));
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

fn bearer(t: &str) -> (&'static str, String) {
    ("Authorization", format!("Bearer {t}"))
}

fn basic(user: &str, password: &str) -> (&'static str, String) {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    ("Authorization", format!("Basic {b64}"))
}

const PAGES: &[&str] = &[
    "/",
    "/?range=7d&bucket=3600",
    "/search?agent=coder",
    "/runs/proj/run-1",
    "/live",
    "/live/events",
];

/// 401 and nothing else: no page, no stream, no error text from a handler.
fn assert_turned_away(a: &Answer, what: &str) {
    assert_eq!(a.status, 401, "{what}: {}\n{}", a.head, a.body);
    let kinds = a.header("content-type").join(",");
    assert!(
        !kinds.contains("text/html") && !kinds.contains("event-stream"),
        "{what}: {kinds}"
    );
    for leak in ["<html", "<table", "event:", "Exception", "ClickHouse"] {
        assert!(
            !a.body.contains(leak),
            "{what}: body has {leak}: {}",
            a.body
        );
    }
}

fn metric(text: &str, reason: &str) -> u64 {
    let want = format!("eddy_ui_requests_denied_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(want.as_str()))
        .map_or(0, |v| v.trim().parse().expect("a count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_let_in_and_nothing_else_does() {
    let cfg = prepare("ui_auth_tokens").await;
    let admin = free_addr();
    let tokens = format!("{TOKEN}=tester,{OTHER_TOKEN}=rotated");
    let ui = start_ui(
        &cfg,
        &[("EDDY_UI_TOKENS", &tokens), ("EDDY_UI_ADMIN_ADDR", &admin)],
        &[],
    );
    let at = ui.addr;

    // The right token, either way a client can send it, and either of the two tokens.
    for page in PAGES {
        let a = get("127.0.0.1", at, page, &[bearer(TOKEN)]).await;
        assert_eq!(a.status, 200, "{page}: {}\n{}", a.head, a.body);
        if *page == "/live/events" {
            assert!(a.header("content-type")[0].contains("text/event-stream"));
        } else {
            assert!(a.body.contains("</html>"), "{page}: {}", a.body);
        }
    }
    let a = get("127.0.0.1", at, "/", &[bearer(TOKEN)]).await;
    assert!(a.body.contains("<table id=\"agents\""), "{}", a.body);
    assert_eq!(a.header("cache-control"), ["private, no-store"]);
    let a = get("127.0.0.1", at, "/", &[basic("anyone", TOKEN)]).await;
    assert_eq!(a.status, 200, "Basic with the token as password");
    let a = get("127.0.0.1", at, "/", &[bearer(OTHER_TOKEN)]).await;
    assert_eq!(a.status, 200, "the second token");

    // Probes and scrapes need no token: the admin server is not the UI's.
    let admin: SocketAddr = admin.parse().expect("admin addr");
    for path in ["/livez", "/readyz", "/metrics"] {
        assert_eq!(
            get("127.0.0.1", admin, path, &[]).await.status,
            200,
            "{path}"
        );
    }

    // From here on every query fails: a request that ran one could not answer 401.
    drop_database(&cfg).await;
    let a = get("127.0.0.1", at, "/", &[bearer(TOKEN)]).await;
    assert_eq!(
        a.status, 503,
        "the right token now meets the dropped database: {}",
        a.body
    );
    // What a user pointed at a database without eddy's tables reads: which one, and the fix.
    assert!(a.body.contains(&cfg.clickhouse.database), "{}", a.body);
    assert!(a.body.contains("eddy migrate"), "{}", a.body);
    assert!(a.body.contains("EDDY_CLICKHOUSE_DATABASE"), "{}", a.body);

    let wrong: Vec<(&str, Vec<(&str, String)>)> = vec![
        ("no credentials", vec![]),
        (
            "a wrong bearer token",
            vec![bearer("not-the-token-0123456789")],
        ),
        ("the token plus a byte", vec![bearer(&format!("{TOKEN}x"))]),
        ("the token minus a byte", vec![bearer(&TOKEN[1..])]),
        ("the token as the Basic user", vec![basic(TOKEN, "x")]),
        (
            "a wrong Basic password",
            vec![basic("tester", "wrong-password-123")],
        ),
        (
            "the token without a scheme",
            vec![("Authorization", TOKEN.to_string())],
        ),
        (
            "the token as X-API-Key",
            vec![("X-API-Key", TOKEN.to_string())],
        ),
        (
            "a proxy's user header with no proxy trusted",
            vec![("X-Forwarded-User", "admin".to_string())],
        ),
    ];
    let (mut missing, mut bad) = (0, 0);
    for (what, headers) in &wrong {
        for page in PAGES.iter().chain(&["/no-such-page"]) {
            let a = get("127.0.0.1", at, page, headers).await;
            assert_turned_away(&a, &format!("{what}, {page}"));
            let challenges = a.header("www-authenticate");
            assert!(
                challenges
                    .iter()
                    .any(|c| c.starts_with("Basic realm=\"eddy ui\"")),
                "{what}: a browser is asked for the token: {challenges:?}"
            );
            if headers.is_empty() || headers[0].0 != "Authorization" || !headers[0].1.contains(' ')
            {
                missing += 1;
            } else {
                bad += 1;
            }
        }
    }
    // Each refusal is counted by reason, for an operator's alert on guessing.
    let m = get("127.0.0.1", admin, "/metrics", &[]).await.body;
    assert_eq!(metric(&m, "missing"), missing, "{m}");
    assert_eq!(metric(&m, "bad_token"), bad, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_user_header_counts_only_from_the_trusted_proxy() {
    let cfg = prepare("ui_auth_proxy").await;
    let ui = start_ui(
        &cfg,
        &[
            ("EDDY_UI_TRUSTED_PROXIES", "127.0.0.2"),
            ("EDDY_UI_PROXY_USER_HEADER", "X-Auth-Request-User"),
        ],
        &[],
    );
    let at = ui.addr;
    let user = || vec![("X-Auth-Request-User", "alice@example.com".to_string())];
    for page in PAGES {
        let a = get("127.0.0.2", at, page, &user()).await;
        assert_eq!(a.status, 200, "from the proxy, {page}: {}", a.body);
    }

    drop_database(&cfg).await;
    let a = get("127.0.0.2", at, "/", &user()).await;
    assert_eq!(
        a.status, 503,
        "the proxy's user now meets the dropped database"
    );
    for page in PAGES {
        let a = get("127.0.0.1", at, page, &user()).await;
        assert_turned_away(&a, &format!("the header from another address, {page}"));
        // No token is configured: there is nothing to prompt for.
        assert!(a.header("www-authenticate").is_empty(), "{}", a.head);
        let a = get("127.0.0.2", at, page, &[]).await;
        assert_turned_away(&a, &format!("the proxy without a user, {page}"));
        let other = [("X-Forwarded-User", "alice@example.com".to_string())];
        let a = get("127.0.0.2", at, page, &other).await;
        assert_turned_away(&a, &format!("the proxy, user in another header, {page}"));
        let a = get("127.0.0.2", at, page, &[bearer(TOKEN)]).await;
        assert_turned_away(
            &a,
            &format!("the proxy, a token none was configured for, {page}"),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_only_when_the_operator_says_so() {
    let cfg = prepare("ui_auth_open").await;
    // Nothing configured: no start, whatever else is wrong (ClickHouse is not even asked: it
    // points at a closed port here), and the error says what to set.
    let mut unreachable = cfg.clone();
    unreachable.clickhouse.url = format!("http://{}", free_addr());
    let out = ui_command(&unreachable, &[], &[])
        .output()
        .expect("run eddy ui");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "eddy ui started without auth");
    assert!(String::from_utf8_lossy(&out.stdout).is_empty());
    for setting in [
        "ui_tokens",
        "EDDY_UI_TOKENS",
        "ui_trusted_proxies",
        "ui_insecure_open",
        "--insecure-open",
    ] {
        assert!(stderr.contains(setting), "error names {setting}: {stderr}");
    }
    // Open and a token at once is a contradiction, refused by name.
    let out = ui_command(
        &cfg,
        &[("EDDY_UI_TOKENS", &format!("{TOKEN}=x"))],
        &["--insecure-open"],
    )
    .output()
    .expect("run eddy ui");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ui_insecure_open"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for (how, env, args) in [
        ("the flag", vec![], vec!["--insecure-open"]),
        (
            "the setting",
            vec![("EDDY_UI_INSECURE_OPEN", "true")],
            vec![],
        ),
    ] {
        let ui = start_ui(&cfg, &env, &args);
        let a = get("127.0.0.1", ui.addr, "/", &[]).await;
        assert_eq!(a.status, 200, "open through {how}: {}", a.body);
        assert!(a.body.contains("<table id=\"agents\""), "{how}");
    }
}
