//! `/live`: an empty table the page's script fills from `/live/events`. The script adds rows
//! with `textContent`, so nothing from a signal becomes markup; the page itself shows nothing
//! from the database or the request.
use super::page;
use maud::{html, Markup, PreEscaped};

const SCRIPT: &str = r#"
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
"#;

const COLUMNS: &[&str] = &[
    "time", "project", "run", "agent", "detector", "severity", "pattern",
];

pub(crate) fn render() -> Markup {
    let body = html! {
        p.muted {
            "Signals published to the output topic from the moment this page opened. "
            span #status { "connecting…" }
        }
        table #live {
            thead {
                tr {
                    @for c in COLUMNS { th { (c) } }
                    th.n { "hits" }
                    th.n { "step" }
                }
            }
            tbody {}
        }
        script { (PreEscaped(SCRIPT)) }
    };
    page("Live signals", body)
}
