//! Delivery with retries: exponential backoff from `backoff_ms`, doubled per try up to
//! `backoff_max_ms` (a `Retry-After` is honoured within the same cap), `max_attempts` tries,
//! then a dead letter. A refusal (4xx other than 408/429) is dead-lettered at once.
use super::{Destination, Notification, NotifyConfig, NotifyError, Request};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How one notification ended at one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Delivered {
        attempts: u32,
    },
    /// Give up on it: `reason` is `rejected` (the destination refused it) or `exhausted`
    /// (it kept failing); `detail` is the last error.
    DeadLetter {
        reason: &'static str,
        detail: String,
        attempts: u32,
    },
    /// Shutdown came first: nothing is recorded, the next start tries again.
    Cancelled,
}

pub(crate) struct Sender {
    client: reqwest::Client,
    max_attempts: u32,
    backoff: Duration,
    backoff_max: Duration,
}

impl Sender {
    pub(crate) fn new(cfg: &NotifyConfig) -> Result<Self, NotifyError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(cfg.timeout_ms))
            .user_agent(concat!("eddy/", env!("CARGO_PKG_VERSION")))
            // A destination that redirects elsewhere would receive the signed body there.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            client,
            max_attempts: cfg.max_attempts,
            backoff: Duration::from_millis(cfg.backoff_ms),
            backoff_max: Duration::from_millis(cfg.backoff_max_ms),
        })
    }

    /// The delay before try `attempt + 1` (attempt ≥ 1), before jitter.
    pub(crate) fn backoff(&self, attempt: u32, retry_after: Option<u64>) -> Duration {
        let exp = self
            .backoff
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        let wanted = retry_after.map_or(exp, |s| Duration::from_secs(s).max(exp));
        wanted.min(self.backoff_max)
    }

    async fn send_once(&self, dest: &Destination, n: &Notification) -> Result<(), NotifyError> {
        let req = Request::build(dest, n, time::OffsetDateTime::now_utc())?;
        let mut b = self.client.post(&req.url).body(req.body);
        for (k, v) in &req.headers {
            b = b.header(k, v);
        }
        let resp = b.send().await?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let body = resp.text().await.unwrap_or_default();
        Err(NotifyError::Status {
            status: status.as_u16(),
            body: body.chars().take(300).collect(),
            retry_after,
        })
    }

    /// Deliver `n` to destination `name`, trying until it is taken, refused, out of tries, or
    /// `shutdown` comes between tries.
    pub(crate) async fn deliver(
        &self,
        name: &str,
        dest: &Destination,
        n: &Notification,
        shutdown: &CancellationToken,
    ) -> Outcome {
        let mut attempt = 0;
        loop {
            attempt += 1;
            if attempt > 1 && shutdown.is_cancelled() {
                return Outcome::Cancelled;
            }
            // A request in flight is not abandoned at shutdown (it ends within `timeout_ms`):
            // cut off after the destination took it, it would be sent again at the next start.
            let err = match self.send_once(dest, n).await {
                Ok(()) => {
                    metrics::counter!("eddy_notify_delivered_total", "destination" => name.to_string())
                        .increment(1);
                    return Outcome::Delivered { attempts: attempt };
                }
                Err(e) => e,
            };
            metrics::counter!("eddy_notify_failures_total", "destination" => name.to_string())
                .increment(1);
            let detail = err.to_string();
            if !err.retryable() || attempt >= self.max_attempts {
                let reason = if err.retryable() {
                    "exhausted"
                } else {
                    "rejected"
                };
                return Outcome::DeadLetter {
                    reason,
                    detail,
                    attempts: attempt,
                };
            }
            let retry_after = match &err {
                NotifyError::Status { retry_after, .. } => *retry_after,
                _ => None,
            };
            let delay = self.backoff(attempt, retry_after);
            // Up to a fifth more, so destinations recovering are not hit by every sender at once.
            let jitter = rand::random::<u64>() % (delay.as_millis() as u64 / 5 + 1);
            let delay = delay + Duration::from_millis(jitter);
            tracing::warn!(
                destination = name, kind = dest.kind(), alert = %n.alert_id, attempt,
                retry_in_ms = delay.as_millis() as u64, error = %detail,
                "notification failed; retrying"
            );
            tokio::select! {
                _ = shutdown.cancelled() => return Outcome::Cancelled,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_honours_retry_after_within_it() {
        let s = Sender::new(&NotifyConfig {
            backoff_ms: 1000,
            backoff_max_ms: 10_000,
            ..NotifyConfig::default()
        })
        .unwrap();
        let ms = |a, ra| s.backoff(a, ra).as_millis();
        assert_eq!(
            [
                ms(1, None),
                ms(2, None),
                ms(3, None),
                ms(4, None),
                ms(5, None)
            ],
            [1000, 2000, 4000, 8000, 10_000]
        );
        assert_eq!(ms(40, None), 10_000);
        assert_eq!(ms(1, Some(3)), 3000);
        assert_eq!(ms(3, Some(1)), 4000);
        assert_eq!(ms(1, Some(3600)), 10_000);
    }

    #[test]
    fn only_answers_that_may_change_are_retried() {
        let st = |status| NotifyError::Status {
            status,
            body: String::new(),
            retry_after: None,
        };
        for s in [408, 429, 500, 502, 503] {
            assert!(st(s).retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 410, 413] {
            assert!(!st(s).retryable(), "{s}");
        }
    }
}
