//! Shopify's Toxiproxy (built by `scripts/bootstrap --dev`), run as a process of the soak and
//! driven over its HTTP API: proxies in front of Kafka and ClickHouse, toxics on them, and a
//! proxy turned off (connections refused).
use super::http::Http;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where `scripts/bootstrap --dev` puts the server (`EDDY_TOXIPROXY_SERVER` overrides).
pub fn server_binary() -> PathBuf {
    if let Ok(p) = std::env::var("EDDY_TOXIPROXY_SERVER") {
        return p.into();
    }
    let cache = std::env::var("EDDY_TOOLS_CACHE").map_or_else(
        |_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/eddy-tools"),
        PathBuf::from,
    );
    cache.join("bin/toxiproxy-server")
}

/// A toxic as Toxiproxy's API takes it; `stream` is `downstream` (server to client) or
/// `upstream`.
pub struct Toxic {
    pub name: &'static str,
    pub kind: &'static str,
    pub stream: &'static str,
    pub attributes: serde_json::Value,
}

pub struct Toxiproxy {
    child: Child,
    api: String,
    http: Http,
}

const API_DEADLINE: Duration = Duration::from_secs(10);

impl Toxiproxy {
    /// Starts the server on `127.0.0.1:port`, its output in `log`, and waits for its API.
    pub async fn start(port: u16, seed: u64, log: &Path) -> Self {
        let bin = server_binary();
        assert!(
            bin.exists(),
            "no Toxiproxy server at {}: run `scripts/bootstrap --dev` (it builds Toxiproxy from \
             its Go module), or set EDDY_TOXIPROXY_SERVER",
            bin.display()
        );
        let out = std::fs::File::create(log).expect("toxiproxy log");
        let child = Command::new(&bin)
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .args(["-seed", &seed.to_string()])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log fd"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let me = Self {
            child,
            api: format!("http://127.0.0.1:{port}"),
            http: Http::new(),
        };
        let t0 = Instant::now();
        loop {
            match me.http.get(&me.url("/version"), API_DEADLINE).await {
                Ok((200, _)) => break,
                other => assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "Toxiproxy's API did not answer within 30 s ({other:?}); see {}",
                    log.display()
                ),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        me
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api)
    }

    async fn call(&self, method: &str, path: &str, body: Option<serde_json::Value>, ok: &[u16]) {
        let r = self
            .http
            .call(
                method,
                &self.url(path),
                body.map(|b| b.to_string()),
                API_DEADLINE,
            )
            .await;
        match r {
            Ok((s, _)) if ok.contains(&s) => {}
            other => panic!("Toxiproxy {method} {path}: {other:?}"),
        }
    }

    /// A proxy listening on `listen` and forwarding to `upstream` (both host:port).
    pub async fn create(&self, name: &str, listen: &str, upstream: &str) {
        let body = serde_json::json!({"name": name, "listen": listen, "upstream": upstream});
        self.call("POST", "/proxies", Some(body), &[201]).await;
    }

    /// Off: the listener closes, so connections are refused and open ones are cut. On again:
    /// it listens and forwards.
    pub async fn set_enabled(&self, proxy: &str, enabled: bool) {
        let body = serde_json::json!({ "enabled": enabled });
        self.call("POST", &format!("/proxies/{proxy}"), Some(body), &[200])
            .await;
    }

    pub async fn add(&self, proxy: &str, t: &Toxic) {
        let body = serde_json::json!({
            "name": t.name, "type": t.kind, "stream": t.stream, "toxicity": 1.0,
            "attributes": t.attributes,
        });
        self.call(
            "POST",
            &format!("/proxies/{proxy}/toxics"),
            Some(body),
            &[200],
        )
        .await;
    }

    pub async fn remove(&self, proxy: &str, toxic: &str) {
        self.call(
            "DELETE",
            &format!("/proxies/{proxy}/toxics/{toxic}"),
            None,
            &[204],
        )
        .await;
    }

    /// Every proxy on, every toxic gone.
    pub async fn reset(&self) {
        self.call("POST", "/reset", None, &[204]).await;
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
