//! `/live`: signals as the output topic receives them, streamed as server-sent events. The
//! reader is the verdict stage's assign-only consumer (no group, no commits), started at the end.
use super::html::page;
use super::AppState;
use crate::verdict::Update;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::Html;
use futures::Stream;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// The page; rows are added with `textContent`, so nothing from a signal becomes markup.
pub async fn page_handler() -> Html<String> {
    let body = r#"<p class="muted">Signals published to the output topic from the moment this page opened. <span id="status">connecting…</span></p>
<table id="live"><thead><tr><th>time</th><th>project</th><th>run</th><th>agent</th><th>detector</th><th>severity</th><th>pattern</th><th class="n">hits</th><th class="n">step</th></tr></thead><tbody></tbody></table>
<script>
(function(){
  var body=document.querySelector('#live tbody'), status=document.getElementById('status');
  var es=new EventSource('/live/events');
  es.onopen=function(){status.textContent='connected';};
  es.onerror=function(){status.textContent='reconnecting…';};
  es.addEventListener('signal',function(e){
    var s=JSON.parse(e.data), tr=document.createElement('tr');
    [s.ts,s.project_id,s.run_id,s.agent_name||'',s.detector,s.severity,s.pattern,s.hits,s.step_index].forEach(function(v,i){
      var td=document.createElement('td');
      if(i===2){var a=document.createElement('a');a.href='/runs/'+encodeURIComponent(s.project_id)+'/'+encodeURIComponent(s.run_id);a.textContent=v;td.appendChild(a);}
      else{td.textContent=String(v);}
      if(i>=7){td.className='n';}
      tr.appendChild(td);
    });
    body.insertBefore(tr,body.firstChild);
    while(body.rows.length>500){body.deleteRow(body.rows.length-1);}
  });
})();
</script>"#;
    Html(page("Live signals", body))
}

pub async fn events(
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
