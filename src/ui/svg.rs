//! Inline SVG charts, drawn on the server: no script, no fonts or files fetched. They are maud
//! templates like the pages, so a series name or a bar's label from the database is escaped as
//! any other text. Every element is written with its end tag: inside `<svg>` an HTML parser
//! takes `<line>` without one as an open element and nests what follows into it.
use super::fmt::short_time;
use super::palette::PALETTE;
use maud::{html, Markup};

const W: f64 = 660.0;
const H: f64 = 240.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 28.0;
const SVG_NS: &str = "http://www.w3.org/2000/svg";

fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// One decimal: enough for a pixel, short in the page.
fn px(v: f64) -> String {
    format!("{v:.1}")
}

/// Where a line chart puts bucket `i` of `n`, and value `v` of a chart whose top is `max`.
struct Plot {
    n: usize,
    max: f64,
}

impl Plot {
    const WIDTH: f64 = W - LEFT - RIGHT;
    const HEIGHT: f64 = H - TOP - BOTTOM;

    fn x(&self, i: usize) -> f64 {
        if self.n <= 1 {
            LEFT + Self::WIDTH / 2.0
        } else {
            LEFT + Self::WIDTH * i as f64 / (self.n - 1) as f64
        }
    }

    fn y(&self, v: f64) -> f64 {
        TOP + Self::HEIGHT - Self::HEIGHT * v / self.max
    }
}

/// The buckets labelled under a line chart (first, middle, last) and how each label hangs.
fn x_labels(n: usize) -> Vec<(usize, &'static str)> {
    let picks: Vec<usize> = if n < 3 {
        (0..n).collect()
    } else {
        vec![0, n / 2, n - 1]
    };
    picks
        .into_iter()
        .map(|i| {
            let anchor = match i {
                0 if n > 1 => "start",
                i if i + 1 == n && n > 1 => "end",
                _ => "middle",
            };
            (i, anchor)
        })
        .collect()
}

/// One line per series over the bucket starts `xs` (a missing bucket is a zero).
pub(crate) fn line_chart(
    id: &str,
    xs: &[i64],
    series: &[(String, Vec<f64>)],
    fmt_y: impl Fn(f64) -> String,
) -> Markup {
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0_f64, f64::max);
    let plot = Plot {
        n: xs.len(),
        max: if max > 0.0 { max } else { 1.0 },
    };
    html! {
        svg id=(id) class="chart" viewBox=(format!("0 0 {W} {H}")) width=(W) height=(H)
            role="img" xmlns=(SVG_NS) {
            @for k in 0..=4 {
                @let v = plot.max * f64::from(k) / 4.0;
                line x1=(LEFT) x2=(W - RIGHT) y1=(px(plot.y(v))) y2=(px(plot.y(v)))
                    stroke="#e5e5e5" {}
                text x=(LEFT - 6.0) y=(px(plot.y(v) + 4.0)) text-anchor="end" font-size="11"
                    fill="#555" { (fmt_y(v)) }
            }
            @for (i, anchor) in x_labels(xs.len()) {
                text x=(px(plot.x(i))) y=(H - 8.0) text-anchor=(anchor) font-size="11"
                    fill="#555" { (short_time(xs[i])) }
            }
            @for (n, (name, values)) in series.iter().enumerate() {
                (series_line(&plot, colour(n), name, values))
            }
            line x1=(LEFT) x2=(LEFT) y1=(TOP) y2=(TOP + Plot::HEIGHT) stroke="#999" {}
        }
    }
}

fn series_line(plot: &Plot, colour: &str, name: &str, values: &[f64]) -> Markup {
    let points: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{},{}", px(plot.x(i)), px(plot.y(*v))))
        .collect();
    html! {
        polyline fill="none" stroke=(colour) stroke-width="2" points=(points.join(" ")) {
            title { (name) }
        }
        // A single point draws no line: a dot shows it.
        @if let [only] = values {
            circle cx=(px(plot.x(0))) cy=(px(plot.y(*only))) r="3" fill=(colour) {}
        }
    }
}

/// Horizontal bars, one per (label, value), longest first as given.
pub(crate) fn bar_chart(id: &str, rows: &[(String, f64)]) -> Markup {
    let max = rows.iter().map(|r| r.1).fold(0.0_f64, f64::max).max(1.0);
    let (w, row_h, label_w) = (560.0, 22.0, 180.0);
    let h = row_h * rows.len().max(1) as f64 + 4.0;
    html! {
        svg id=(id) class="chart" viewBox=(format!("0 0 {w} {h}")) width=(w) height=(h)
            role="img" xmlns=(SVG_NS) {
            @for (i, (label, v)) in rows.iter().enumerate() {
                @let y = i as f64 * row_h + 2.0;
                @let bw = (w - label_w - 70.0) * v / max;
                text x=(label_w - 6.0) y=(px(y + 14.0)) text-anchor="end" font-size="12"
                    fill="#333" { (label) }
                rect x=(label_w) y=(px(y)) width=(px(bw)) height=(row_h - 6.0) fill=(colour(i)) {}
                text x=(px(label_w + bw + 4.0)) y=(px(y + 14.0)) font-size="12" fill="#333" { (v) }
            }
        }
    }
}

/// What a step is, for the timeline.
pub(crate) struct Mark {
    pub(crate) step_index: u64,
    pub(crate) ok: bool,
    pub(crate) repeated: bool,
}

impl Mark {
    fn fill(&self) -> &'static str {
        match (self.ok, self.repeated) {
            (false, _) => "#d62728",
            (true, true) => "#ff7f0e",
            (true, false) => "#2ca02c",
        }
    }
}

/// A run's steps as a strip of cells, with the loop start and the verdict marked.
pub(crate) fn timeline(marks: &[Mark], loop_start: Option<u64>, caught: Option<u64>) -> Markup {
    let (w, h) = (1100.0, 64.0);
    let cell = (w - 20.0) / marks.len().max(1) as f64;
    // A step index the run skipped is drawn where the next step it has is.
    let x_of = |idx: u64| {
        let pos = marks
            .iter()
            .position(|m| m.step_index >= idx)
            .unwrap_or(marks.len());
        10.0 + cell * pos as f64
    };
    let rules = [
        (loop_start, "loop began", "#9467bd", 14.0),
        (caught, "verdict", "#000", 60.0),
    ];
    html! {
        svg id="timeline" class="chart" viewBox=(format!("0 0 {w} {h}")) width=(w) height=(h)
            role="img" xmlns=(SVG_NS) {
            @for (i, m) in marks.iter().enumerate() {
                rect x=(format!("{:.2}", 10.0 + cell * i as f64)) y="20"
                    width=(format!("{:.2}", cell.max(0.5))) height="24" fill=(m.fill())
                    stroke="white" stroke-width="0.5" {
                    title { "step " (m.step_index) }
                }
            }
            @for (idx, label, colour, y) in rules {
                @if let Some(idx) = idx {
                    @let x = x_of(idx);
                    line x1=(px(x)) x2=(px(x)) y1="16" y2="48" stroke=(colour) stroke-width="2" {}
                    text x=(px(x + 3.0)) y=(y) font-size="11" fill=(colour) {
                        (label) " (step " (idx) ")"
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = r#"<script>alert("x")</script>"#;

    /// Every element opened inside the chart is closed again.
    fn balanced(svg: &str) {
        for tag in ["svg", "line", "text", "polyline", "title", "circle", "rect"] {
            let opened =
                svg.matches(&format!("<{tag} ")).count() + svg.matches(&format!("<{tag}>")).count();
            let closed = svg.matches(&format!("</{tag}>")).count();
            assert_eq!(opened, closed, "<{tag}> in {svg}");
        }
    }

    #[test]
    fn labels_from_the_database_are_text() {
        let line = line_chart(
            "c",
            &[0, 60],
            &[(HOSTILE.to_string(), vec![1.0, 2.0])],
            |v| format!("{v}"),
        )
        .into_string();
        let bars = bar_chart("b", &[(HOSTILE.to_string(), 3.0)]).into_string();
        for svg in [&line, &bars] {
            assert!(!svg.contains("<script"), "{svg}");
            assert!(svg.contains("&lt;script&gt;alert(&quot;x&quot;)"), "{svg}");
            balanced(svg);
        }
    }

    #[test]
    fn every_element_is_closed_and_one_point_gets_a_dot() {
        let one =
            line_chart("c", &[0], &[("a".into(), vec![1.0])], |v| format!("{v}")).into_string();
        assert_eq!(one.matches("<circle ").count(), 1, "{one}");
        balanced(&one);
        let marks = [
            Mark {
                step_index: 0,
                ok: true,
                repeated: false,
            },
            Mark {
                step_index: 2,
                ok: false,
                repeated: true,
            },
        ];
        let t = timeline(&marks, Some(1), Some(2)).into_string();
        balanced(&t);
        assert!(
            t.contains("loop began (step 1)") && t.contains("verdict (step 2)"),
            "{t}"
        );
        assert_eq!(t.matches("<rect ").count(), 2);
    }
}
