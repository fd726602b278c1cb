//! Inline SVG charts, drawn on the server: no script, no fonts or files fetched.
use super::html::esc;
use super::palette::PALETTE;
use std::fmt::Write;

const W: f64 = 660.0;
const H: f64 = 240.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 28.0;

/// `MM-DD hh:mm` (UTC) of epoch seconds.
pub fn short_time(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .map(|d| {
            format!(
                "{:02}-{:02} {:02}:{:02}",
                u8::from(d.month()),
                d.day(),
                d.hour(),
                d.minute()
            )
        })
        .unwrap_or_default()
}

/// One line per series over the bucket starts `xs` (a missing bucket is a zero).
pub fn line_chart(
    id: &str,
    xs: &[i64],
    series: &[(String, Vec<f64>)],
    fmt_y: impl Fn(f64) -> String,
) -> String {
    let mut out = String::new();
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0_f64, f64::max);
    let max = if max > 0.0 { max } else { 1.0 };
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x_at = |i: usize| {
        if xs.len() <= 1 {
            LEFT + pw / 2.0
        } else {
            LEFT + pw * i as f64 / (xs.len() - 1) as f64
        }
    };
    let y_at = |v: f64| TOP + ph - ph * v / max;
    let _ = write!(
        out,
        r#"<svg id="{id}" class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" xmlns="http://www.w3.org/2000/svg">"#
    );
    for k in 0..=4 {
        let v = max * f64::from(k) / 4.0;
        let y = y_at(v);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11" fill="#555">{label}</text>"##,
            x2 = W - RIGHT,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            label = esc(&fmt_y(v))
        );
    }
    if !xs.is_empty() {
        let picks: Vec<usize> = if xs.len() < 3 {
            (0..xs.len()).collect()
        } else {
            vec![0, xs.len() / 2, xs.len() - 1]
        };
        for i in picks {
            let anchor = if i == 0 && xs.len() > 1 {
                "start"
            } else if i + 1 == xs.len() && xs.len() > 1 {
                "end"
            } else {
                "middle"
            };
            let _ = write!(
                out,
                r##"<text x="{x:.1}" y="{y}" text-anchor="{anchor}" font-size="11" fill="#555">{t}</text>"##,
                x = x_at(i),
                y = H - 8.0,
                t = esc(&short_time(xs[i]))
            );
        }
    }
    for (n, (name, values)) in series.iter().enumerate() {
        let color = PALETTE[n % PALETTE.len()];
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x_at(i), y_at(*v)))
            .collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"><title>{}</title></polyline>"#,
            points.join(" "),
            esc(name)
        );
        if values.len() == 1 {
            let _ = write!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                x_at(0),
                y_at(values[0])
            );
        }
    }
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{b}" stroke="#999"/></svg>"##,
        b = TOP + ph
    );
    out
}

/// Horizontal bars, one per (label, value), longest first as given.
pub fn bar_chart(id: &str, rows: &[(String, f64)]) -> String {
    let max = rows.iter().map(|r| r.1).fold(0.0_f64, f64::max).max(1.0);
    let (w, row_h, label_w) = (560.0, 22.0, 180.0);
    let h = row_h * rows.len().max(1) as f64 + 4.0;
    let mut out = format!(
        r#"<svg id="{id}" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" xmlns="http://www.w3.org/2000/svg">"#
    );
    for (i, (label, v)) in rows.iter().enumerate() {
        let y = i as f64 * row_h + 2.0;
        let bw = (w - label_w - 70.0) * v / max;
        let _ = write!(
            out,
            r##"<text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="12" fill="#333">{l}</text><rect x="{label_w}" y="{y:.1}" width="{bw:.1}" height="{bh}" fill="{c}"/><text x="{vx:.1}" y="{ty:.1}" font-size="12" fill="#333">{v}</text>"##,
            tx = label_w - 6.0,
            ty = y + 14.0,
            l = esc(label),
            bh = row_h - 6.0,
            c = PALETTE[i % PALETTE.len()],
            vx = label_w + bw + 4.0,
        );
    }
    out.push_str("</svg>");
    out
}

/// What a step is, for the timeline.
pub struct Mark {
    pub step_index: u64,
    pub ok: bool,
    pub repeated: bool,
}

/// A run's steps as a strip of cells, with the loop start and the verdict marked.
pub fn timeline(marks: &[Mark], loop_start: Option<u64>, caught: Option<u64>) -> String {
    let n = marks.len().max(1) as f64;
    let (w, h) = (1100.0, 64.0);
    let cell = (w - 20.0) / n;
    let x_of = |idx: u64| {
        let pos = marks
            .iter()
            .position(|m| m.step_index >= idx)
            .unwrap_or(marks.len());
        10.0 + cell * pos as f64
    };
    let mut out = format!(
        r#"<svg id="timeline" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" xmlns="http://www.w3.org/2000/svg">"#
    );
    for (i, m) in marks.iter().enumerate() {
        let fill = match (m.ok, m.repeated) {
            (false, _) => "#d62728",
            (true, true) => "#ff7f0e",
            (true, false) => "#2ca02c",
        };
        let _ = write!(
            out,
            r#"<rect x="{x:.2}" y="20" width="{cw:.2}" height="24" fill="{fill}" stroke="white" stroke-width="0.5"><title>step {s}</title></rect>"#,
            x = 10.0 + cell * i as f64,
            cw = cell.max(0.5),
            s = m.step_index
        );
    }
    for (idx, label, color, y) in [
        (loop_start, "loop began", "#9467bd", 14.0),
        (caught, "verdict", "#000", 60.0),
    ] {
        if let Some(idx) = idx {
            let x = x_of(idx);
            let _ = write!(
                out,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="16" y2="48" stroke="{color}" stroke-width="2"/><text x="{tx:.1}" y="{y}" font-size="11" fill="{color}">{label} (step {idx})</text>"#,
                tx = x + 3.0
            );
        }
    }
    out.push_str("</svg>");
    out
}
