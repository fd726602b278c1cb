//! Who may read the pages. Every route of `eddy ui` (pages, queries, the live stream) sits behind
//! [`require`]; a request it turns away never reaches a handler, so it runs no ClickHouse query
//! and subscribes to nothing.
//!
//! A request is let in when it carries one of `ui_tokens`, as `Authorization: Bearer <token>`
//! or as the password of HTTP Basic (a browser's sign-in prompt; any user name), or when its TCP
//! peer is one of `ui_trusted_proxies` and names a user in `ui_proxy_user_header`. That header
//! is believed from nowhere else: anyone can send it. `ui_insecure_open` lets everything in.
use super::UiError;
use crate::auth::SecretTable;
use crate::config::UiConfig;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

pub(crate) struct Gate {
    /// Token → user name.
    tokens: SecretTable<Arc<str>>,
    proxies: Vec<IpNet>,
    user_header: HeaderName,
    open: bool,
}

/// Why a request was turned away (the `reason` label of `eddy_ui_requests_denied_total`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Denied {
    /// No token, and no user header from a trusted proxy.
    Missing,
    /// A token that is not one of `ui_tokens`.
    BadToken,
    /// The user header, from a peer that is not a trusted proxy.
    UntrustedProxy,
}

impl Denied {
    fn label(self) -> &'static str {
        match self {
            Denied::Missing => "missing",
            Denied::BadToken => "bad_token",
            Denied::UntrustedProxy => "untrusted_proxy",
        }
    }
}

/// The token in `Authorization`: `Bearer <token>`, or the password of `Basic <user:password>`.
/// Schemes are case-insensitive (RFC 9110).
fn presented_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, rest) = value.split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.to_string());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        return text
            .split_once(':')
            .map(|(_, password)| password.to_string());
    }
    None
}

impl Gate {
    /// From the UI's section; an error when nothing authenticates and open was not chosen.
    pub(crate) fn new(cfg: &UiConfig) -> Result<Self, UiError> {
        if !cfg.insecure_open && !cfg.has_auth() {
            return Err(UiError::NoAuth);
        }
        let proxies = cfg.proxy_networks().map_err(UiError::Auth)?;
        let user_header = HeaderName::from_bytes(cfg.proxy_user_header.as_bytes())
            .map_err(|_| UiError::Auth("ui_proxy_user_header is not a header name".into()))?;
        Ok(Self {
            tokens: SecretTable::new(
                cfg.tokens
                    .iter()
                    .map(|(t, name)| (t.clone(), Arc::from(name.as_str()))),
            ),
            proxies,
            user_header,
            open: cfg.insecure_open,
        })
    }

    /// For the start-up log line: what lets a request in (never a token).
    pub(crate) fn describe(&self) -> String {
        if self.open {
            return "none (ui_insecure_open): every page is served to anyone".into();
        }
        let mut ways = Vec::new();
        if !self.tokens.is_empty() {
            ways.push(format!("{} bearer token(s)", self.tokens.len()));
        }
        if !self.proxies.is_empty() {
            let nets: Vec<String> = self.proxies.iter().map(ToString::to_string).collect();
            ways.push(format!("{} from {}", self.user_header, nets.join(", ")));
        }
        ways.join(" or ")
    }

    fn trusted(&self, peer: Option<IpAddr>) -> bool {
        // An IPv4 client of a dual-stack socket shows up as ::ffff:a.b.c.d.
        peer.is_some_and(|p| {
            let p = p.to_canonical();
            self.proxies.iter().any(|n| n.contains(&p))
        })
    }

    /// The user a request is let in as, or why not.
    fn admit(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Result<Arc<str>, Denied> {
        if self.open {
            return Ok(Arc::from("anonymous"));
        }
        let token = presented_token(headers);
        if let Some(user) = token.as_deref().and_then(|t| self.tokens.find(t)) {
            return Ok(user.clone());
        }
        let proxy_user = headers
            .get(&self.user_header)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|u| !u.is_empty());
        match proxy_user {
            // A proxy may pass its own Authorization header along: its user header decides.
            Some(user) if self.trusted(peer) => Ok(Arc::from(user)),
            Some(_) if !self.proxies.is_empty() => Err(Denied::UntrustedProxy),
            _ if token.is_some() => Err(Denied::BadToken),
            _ => Err(Denied::Missing),
        }
    }

    fn deny(&self, why: Denied) -> Response {
        metrics::counter!("eddy_ui_requests_denied_total", "reason" => why.label()).increment(1);
        let how = if self.tokens.is_empty() {
            "sign in through the authenticating proxy in front of it"
        } else {
            "send a token: `Authorization: Bearer <token>`, or enter it as the password \
             of the browser's sign-in prompt"
        };
        let body = format!("401 Unauthorized: this eddy ui needs authentication; {how}.\n");
        let mut r = (StatusCode::UNAUTHORIZED, body).into_response();
        let h = r.headers_mut();
        if !self.tokens.is_empty() {
            // Basic first: it is the one a browser can prompt for.
            h.append(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(r#"Basic realm="eddy ui", charset="UTF-8""#),
            );
            h.append(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(r#"Bearer realm="eddy ui""#),
            );
        }
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    }
}

/// The middleware in front of every route.
pub(crate) async fn require(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    match gate.admit(peer, req.headers()) {
        Ok(user) => {
            tracing::debug!(%user, path = %req.uri().path(), "ui: request");
            let mut r = next.run(req).await;
            // What one user was shown is not for shared caches.
            r.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, no-store"),
            );
            r
        }
        Err(why) => {
            tracing::debug!(peer = ?peer, reason = why.label(), path = %req.uri().path(), "ui: unauthorized");
            gate.deny(why)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef-token";

    fn gate(tokens: bool, proxies: &[&str]) -> Gate {
        let mut cfg = UiConfig::default();
        if tokens {
            cfg.tokens.insert(TOKEN.into(), "ops".into());
        }
        cfg.trusted_proxies = proxies.iter().map(|p| p.to_string()).collect();
        cfg.proxy_user_header = "X-Auth-Request-User".into();
        Gate::new(&cfg).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        m
    }

    fn basic(user_password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    }

    #[test]
    fn a_token_lets_in_as_bearer_or_as_the_basic_password() {
        let g = gate(true, &[]);
        let ip = Some("192.0.2.1".parse().unwrap());
        let ok = |pairs: &[(&'static str, &str)]| g.admit(ip, &headers(pairs));
        assert_eq!(
            ok(&[("authorization", &format!("Bearer {TOKEN}"))]).as_deref(),
            Ok("ops")
        );
        assert_eq!(
            ok(&[("authorization", &format!("bearer  {TOKEN} "))]).as_deref(),
            Ok("ops")
        );
        assert_eq!(
            ok(&[("authorization", &basic(&format!("anyone:{TOKEN}")))]).as_deref(),
            Ok("ops")
        );
        assert_eq!(ok(&[]), Err(Denied::Missing));
        assert_eq!(
            ok(&[("authorization", &format!("Bearer {TOKEN}x"))]),
            Err(Denied::BadToken)
        );
        assert_eq!(
            ok(&[("authorization", &basic(&format!("{TOKEN}:wrong")))]),
            Err(Denied::BadToken)
        );
        assert_eq!(ok(&[("authorization", TOKEN)]), Err(Denied::Missing));
        // No proxy is trusted: the header is no one's word.
        assert_eq!(
            ok(&[("x-auth-request-user", "alice")]),
            Err(Denied::Missing)
        );
    }

    #[test]
    fn the_user_header_counts_only_from_a_trusted_proxy() {
        let g = gate(false, &["10.1.0.0/16", "fd00::7"]);
        let h = headers(&[("x-auth-request-user", "alice@example.com")]);
        let at = |ip: &str| g.admit(Some(ip.parse().unwrap()), &h);
        assert_eq!(at("10.1.200.3").as_deref(), Ok("alice@example.com"));
        assert_eq!(at("::ffff:10.1.0.9").as_deref(), Ok("alice@example.com"));
        assert_eq!(at("fd00::7").as_deref(), Ok("alice@example.com"));
        assert_eq!(at("10.2.0.1"), Err(Denied::UntrustedProxy));
        assert_eq!(at("fd00::8"), Err(Denied::UntrustedProxy));
        assert_eq!(g.admit(None, &h), Err(Denied::UntrustedProxy));
        // From the proxy, but no user: nobody signed in.
        let ip = Some("10.1.0.1".parse().unwrap());
        assert_eq!(g.admit(ip, &HeaderMap::new()), Err(Denied::Missing));
        let blank = headers(&[("x-auth-request-user", "  ")]);
        assert_eq!(g.admit(ip, &blank), Err(Denied::Missing));
    }

    #[test]
    fn nothing_configured_is_an_error_unless_open_was_chosen() {
        let err = Gate::new(&UiConfig::default()).err().unwrap().to_string();
        for names in ["ui_tokens", "ui_trusted_proxies", "ui_insecure_open"] {
            assert!(err.contains(names), "{err}");
        }
        let open = Gate::new(&UiConfig {
            insecure_open: true,
            ..UiConfig::default()
        })
        .unwrap();
        assert!(open.admit(None, &HeaderMap::new()).is_ok());
    }

    #[test]
    fn a_refusal_offers_the_prompt_only_when_tokens_exist() {
        let r = gate(true, &[]).deny(Denied::Missing);
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let challenges: Vec<_> = r
            .headers()
            .get_all(header::WWW_AUTHENTICATE)
            .iter()
            .collect();
        assert_eq!(challenges.len(), 2);
        assert!(challenges[0].to_str().unwrap().starts_with("Basic "));
        let r = gate(false, &["10.0.0.1"]).deny(Denied::Missing);
        assert!(r.headers().get(header::WWW_AUTHENTICATE).is_none());
    }
}
