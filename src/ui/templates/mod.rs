//! The pages, as maud templates: the page frame and tables here, one file per page.
//!
//! maud rather than askama: maud's templates are Rust (`html!`), checked by the compiler with
//! the rest of the code and kept in `src/ui` beside the handlers, and every `(value)` spliced
//! into one is escaped unless it is wrapped in `PreEscaped`, which here wraps only constants
//! (the stylesheet, the live page's script). askama's templates are files in a separate
//! language under the crate's `templates/`, with their own configuration.
//!
//! Templates take rows and values already shaped for them (see `fleet_view`, `run_view`) and
//! make no decisions beyond how those look.
pub(crate) mod fleet;
pub(crate) mod live;
pub(crate) mod run;
pub(crate) mod search;

use maud::{html, Markup, PreEscaped, DOCTYPE};

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}\
header{background:#123;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}\
header a{color:#cde;text-decoration:none}header b{font-size:16px}\
main{padding:12px 16px;max-width:1360px}h2{font-size:15px;margin:18px 0 6px}\
table{border-collapse:collapse;background:#fff;font-size:13px}\
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#eef2f5}\
.chart{background:#fff;border:1px solid #ddd}.grid{display:flex;flex-wrap:wrap;gap:24px}\
.legend span{display:inline-block;margin-right:14px;font-size:12px}\
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}\
tr.rep td{background:#fff3e0}tr.err td{background:#fde8e8}tr.loop td:first-child{border-left:4px solid #9467bd}\
tr.caught td{border-top:2px solid #000}.muted{color:#777}pre{margin:0;white-space:pre-wrap;font-size:12px;max-width:760px}\
form{display:flex;gap:8px;align-items:center;flex-wrap:wrap}input,select{font:inherit;padding:2px 4px}\
.kv td:first-child{color:#555}";

/// The page frame: title, navigation, body.
pub(crate) fn page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width";
                title { (title) " · eddy" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    b { "eddy" }
                    a href="/" { "Fleet" }
                    a href="/live" { "Live" }
                    a href="/search" { "Search" }
                }
                main {
                    h1 style="font-size:18px" { (title) }
                    (body)
                }
            }
        }
    }
}

/// A table with an id (the browser test finds it), a header unless every heading is blank,
/// and its rows (each a `tr`), or a line saying there are none.
pub(crate) fn table(id: &str, head: &[&str], rows: &[Markup]) -> Markup {
    html! {
        table id=(id) {
            @if head.iter().any(|h| !h.is_empty()) {
                thead { tr { @for h in head { th { (h) } } } }
            }
            tbody {
                @for r in rows { (r) }
                @if rows.is_empty() {
                    tr { td.muted colspan=(head.len()) { "nothing in this window" } }
                }
            }
        }
    }
}

/// What a failed request shows: the error's own words.
pub(crate) fn error_page(message: &str) -> Markup {
    page("Error", html! { p { (message) } })
}

/// Hostile names for the pages' escaping tests: markup, both quotes, an ampersand.
#[cfg(test)]
pub(crate) mod hostile {
    pub(crate) const NAME: &str = r#"<script>alert("x")</script>' & <img src=x onerror=y>"#;

    /// `page` shows `NAME` only as text: no element or attribute of its own survives.
    pub(crate) fn assert_escaped(page: &str, at_least: usize) {
        // The frame has no script of its own, and quotes can't close an attribute.
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains(r#"alert("x")"#), "{page}");
        let escaped =
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;' &amp; &lt;img src=x onerror=y&gt;";
        let shown = page.matches(escaped).count();
        assert!(
            shown >= at_least,
            "shown {shown} times, want {at_least}: {page}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_and_the_error_page_escape_their_text() {
        let p = page(hostile::NAME, html! {}).into_string();
        hostile::assert_escaped(&p, 2);
        hostile::assert_escaped(&error_page(hostile::NAME).into_string(), 1);
    }

    #[test]
    fn an_empty_table_says_so_under_its_header() {
        let t = table("t", &["a", "b"], &[]).into_string();
        assert!(
            t.starts_with(r#"<table id="t"><thead><tr><th>a</th>"#),
            "{t}"
        );
        assert!(t.contains(r#"colspan="2">nothing in this window"#), "{t}");
        let kv = table("kv", &["", ""], &[html! { tr { td { "k" } } }]).into_string();
        assert!(!kv.contains("<thead>") && kv.contains("<td>k</td>"), "{kv}");
    }
}
