//! HTML building blocks: escaping, the page frame, tables, links. Every value that comes from
//! the database or the request goes through [`esc`] (text) or [`path_part`]/[`query_part`]
//! (URLs, then escaped as attributes).
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::fmt::Write;

/// Escape text for an element body or a double- or single-quoted attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// One path segment or query value, percent-encoded (a `/` in an id stays inside its segment).
pub fn path_part(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

pub fn query_part(s: &str) -> String {
    path_part(s)
}

pub fn run_href(project: &str, run: &str) -> String {
    format!("/runs/{}/{}", path_part(project), path_part(run))
}

/// `<a href=...>text</a>`, both escaped.
pub fn link(href: &str, text: &str) -> String {
    format!(r#"<a href="{}">{}</a>"#, esc(href), esc(text))
}

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

/// The page frame: title, navigation, body (already HTML).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{t} · eddy</title>\
         <style>{STYLE}</style></head><body><header><b>eddy</b>\
         <a href=\"/\">Fleet</a><a href=\"/live\">Live</a><a href=\"/search\">Search</a></header>\
         <main><h1 style=\"font-size:18px\">{t}</h1>{body}</main></body></html>",
        t = esc(title)
    )
}

/// A cell: text (escaped) or HTML, right-aligned when numeric.
pub enum Cell {
    Text(String),
    Num(String),
    Html(String),
}

/// A table with an id (the browser test finds it), header and rows; each row may have a class.
pub fn table(id: &str, head: &[&str], rows: &[(String, Vec<Cell>)]) -> String {
    let mut out = format!(r#"<table id="{}">"#, esc(id));
    if head.iter().any(|h| !h.is_empty()) {
        out.push_str("<thead><tr>");
        for h in head {
            let _ = write!(out, "<th>{}</th>", esc(h));
        }
        out.push_str("</tr></thead>");
    }
    out.push_str("<tbody>");
    for (class, cells) in rows {
        if class.is_empty() {
            out.push_str("<tr>");
        } else {
            let _ = write!(out, r#"<tr class="{}">"#, esc(class));
        }
        for c in cells {
            match c {
                Cell::Text(t) => {
                    let _ = write!(out, "<td>{}</td>", esc(t));
                }
                Cell::Num(t) => {
                    let _ = write!(out, r#"<td class="n">{}</td>"#, esc(t));
                }
                Cell::Html(h) => {
                    let _ = write!(out, "<td>{h}</td>");
                }
            }
        }
        out.push_str("</tr>");
    }
    if rows.is_empty() {
        let _ = write!(
            out,
            r#"<tr><td class="muted" colspan="{}">nothing in this window</td></tr>"#,
            head.len()
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// A chart legend: series names in their colours.
pub fn legend(names: &[String]) -> String {
    let mut out = String::from(r#"<div class="legend">"#);
    for (i, n) in names.iter().enumerate() {
        let c = super::palette::PALETTE[i % super::palette::PALETTE.len()];
        let _ = write!(
            out,
            r#"<span><i style="background:{c}"></i>{}</span>"#,
            esc(n)
        );
    }
    out.push_str("</div>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_values_cannot_make_markup() {
        assert_eq!(
            esc(r#"<script>"x"&'y'</script>"#),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;"
        );
        let t = table(
            "t",
            &["a"],
            &[(String::new(), vec![Cell::Text("<b>".into())])],
        );
        assert!(t.contains("<td>&lt;b&gt;</td>"), "{t}");
        assert_eq!(run_href("p/1", "r 2?"), "/runs/p%2F1/r%202%3F");
        assert_eq!(
            link("/x?a=1&b=\"", "<i>"),
            r#"<a href="/x?a=1&amp;b=&quot;">&lt;i&gt;</a>"#
        );
    }
}
