//! Plain HTTP/1.1 on loopback, for Toxiproxy's API and the workers' admin routes: hyper-util's
//! client (already eddy's dependency), every call bounded by a deadline so a hung peer is an
//! answer, not a hang of the soak.
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

#[derive(Clone)]
pub struct Http(Client<HttpConnector, Full<Bytes>>);

impl Http {
    pub fn new() -> Self {
        Self(Client::builder(TokioExecutor::new()).build_http())
    }

    /// `method url` with an optional JSON body: the status and the body as text, or why none.
    pub async fn call(
        &self,
        method: &str,
        url: &str,
        json: Option<String>,
        deadline: Duration,
    ) -> Result<(u16, String), String> {
        let mut req = hyper::Request::builder().method(method).uri(url);
        if json.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(json.unwrap_or_default())))
            .map_err(|e| format!("{method} {url}: {e}"))?;
        let call = async {
            let resp = self.0.request(req).await.map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok((status, String::from_utf8_lossy(&body).into_owned()))
        };
        match tokio::time::timeout(deadline, call).await {
            Ok(r) => r.map_err(|e: String| format!("{method} {url}: {e}")),
            Err(_) => Err(format!("{method} {url}: no answer within {deadline:?}")),
        }
    }

    pub async fn get(&self, url: &str, deadline: Duration) -> Result<(u16, String), String> {
        self.call("GET", url, None, deadline).await
    }
}
