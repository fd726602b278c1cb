//! `/live`: signals as the output topic receives them, streamed as server-sent events. The
//! reader is the verdict stage's assign-only consumer (no group, no commits), started at the end.
use super::{templates, AppState};
use crate::verdict::Update;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::Html;
use futures::Stream;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

pub(crate) async fn page_handler() -> Html<String> {
    Html(templates::live::render().into_string())
}

pub(crate) async fn events(
    State(st): State<Arc<AppState>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let updates = st.verdicts.subscribe();
    let stop = st.stop.clone();
    let stream = futures::stream::unfold((updates, stop), |(mut rx, stop)| async move {
        loop {
            let next = tokio::select! {
                _ = stop.cancelled() => return None,
                n = rx.recv() => n,
            };
            match next {
                Ok(Update::Signal(s)) => {
                    let data = serde_json::to_string(&*s).unwrap_or_default();
                    return Some((Ok(Event::default().event("signal").data(data)), (rx, stop)));
                }
                Ok(Update::Ended(_)) => {}
                // A slow page misses what it lagged behind; it is a live view, not a log.
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
