//! Routes: each handler reads its parameters, runs its page's queries and renders its template.
use super::params::{FleetParams, SearchParams};
use super::{fleet_view, live, queries, templates, AppState, UiError};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use maud::Markup;
use std::collections::BTreeMap;
use std::sync::Arc;

type Params = Query<BTreeMap<String, String>>;
type Page = Result<Html<String>, UiError>;

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(fleet))
        .route("/runs/{project_id}/{run_id}", get(run))
        .route("/search", get(search))
        .route("/live", get(live::page_handler))
        .route("/live/events", get(live::events))
        .with_state(state)
}

fn html(m: Markup) -> Html<String> {
    Html(m.into_string())
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let status = match self {
            UiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            // Not eddy's fault, nor lasting once a worker ran against the database.
            UiError::Query(crate::query::QueryError::NoSchema(_)) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, html(templates::error_page(&self.to_string()))).into_response()
    }
}

/// Now, for a database with no rollups yet.
fn now_secs() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

async fn fleet(State(st): State<Arc<AppState>>, Query(p): Params) -> Page {
    let params = FleetParams::parse(&p)?;
    let to = match params.to {
        Some(to) => to,
        // The newest data, not the clock: a fleet that went quiet still shows its last day.
        None => match queries::latest(&st.client).await? {
            0 => now_secs(),
            latest => latest + 60,
        },
    };
    let w = params.window(to);
    let data = queries::fleet(&st.client, &w).await?;
    let charts = fleet_view::charts(&w, &data.agents, &data.series);
    Ok(html(templates::fleet::render(&params, &w, &charts, &data)))
}

async fn run(
    State(st): State<Arc<AppState>>,
    Path((project, run_id)): Path<(String, String)>,
) -> Page {
    let data = queries::run(&st.client, &project, &run_id).await?;
    Ok(html(templates::run::render(&project, &run_id, &data)))
}

async fn search(State(st): State<Arc<AppState>>, Query(p): Params) -> Page {
    let params = SearchParams::parse(&p)?;
    let rows = queries::search(&st.client, &params.search).await?;
    Ok(html(templates::search::render(&params, &rows)))
}
