//! What the soak measured: per step and mode the time from the fault's end to the group's lag
//! back at zero, and the table of those times by fault kind (p50 / max).
use std::time::Duration;

pub struct Outcome {
    pub fault: &'static str,
    pub lane: &'static str,
    /// From the fault's end to lag 0; `None`: not within the soak's give-up time.
    pub recovery: Option<Duration>,
    /// From the fault's end to lag 0 with every running worker holding partitions.
    pub whole: Option<Duration>,
    /// Not caught up with every worker holding partitions within the stall threshold.
    pub stuck: bool,
    /// Workers the soak restarted as an orchestrator would (they exited, or `/livez` failed).
    pub restarts: u32,
}

/// Nearest-rank percentile of sorted `v` (`p` in 0..=100).
fn percentile(v: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

fn column(secs: &mut [f64], all: usize) -> (String, String) {
    secs.sort_by(f64::total_cmp);
    let never = all - secs.len();
    let (p50, max) = match secs.last() {
        None => ("-".to_string(), "-".to_string()),
        Some(m) => (format!("{:.1}", percentile(secs, 50.0)), format!("{m:.1}")),
    };
    if never > 0 {
        (p50, format!("never({never})"))
    } else {
        (p50, max)
    }
}

/// The table: one row per fault kind and mode.
pub fn table(outcomes: &[Outcome], stuck_after: Duration) -> String {
    // Rows in the order the faults first came.
    let mut rows: Vec<((&str, &str), Vec<&Outcome>)> = Vec::new();
    for o in outcomes {
        match rows.iter_mut().find(|(k, _)| *k == (o.fault, o.lane)) {
            Some((_, v)) => v.push(o),
            None => rows.push(((o.fault, o.lane), vec![o])),
        }
    }
    let head = |a: &str, b: &str, c: &str, d: &str, e: &str, f: &str, g: &str, h: &str| {
        format!("{a:<26} {b:<4} {c:>3} {d:>9} {e:>9} {f:>9} {g:>6} {h:>8}\n")
    };
    let mut out = head(
        "fault",
        "mode",
        "n",
        "lag0 p50",
        "lag0 max",
        "whole max",
        "stuck",
        "restarts",
    );
    for ((fault, lane), os) in rows {
        let mut lag0: Vec<f64> = os
            .iter()
            .filter_map(|o| o.recovery.map(|d| d.as_secs_f64()))
            .collect();
        let mut whole: Vec<f64> = os
            .iter()
            .filter_map(|o| o.whole.map(|d| d.as_secs_f64()))
            .collect();
        let (p50, max) = column(&mut lag0, os.len());
        let (_, wmax) = column(&mut whole, os.len());
        out.push_str(&head(
            fault,
            lane,
            &os.len().to_string(),
            &p50,
            &max,
            &wmax,
            &os.iter().filter(|o| o.stuck).count().to_string(),
            &os.iter().map(|o| o.restarts).sum::<u32>().to_string(),
        ));
    }
    out.push_str(&format!(
        "seconds from the fault's end: lag0 = the group's committed offsets cover the input \
         topic; whole = that, with every running worker holding partitions. stuck = not whole \
         within {} s; never = not within the give-up time; restarts = workers restarted because \
         they exited, failed /livez 3 times, or stayed stuck\n",
        stuck_after.as_secs()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 2.0);
        assert_eq!(percentile(&v, 100.0), 4.0);
        assert_eq!(percentile(&[7.0], 50.0), 7.0);
    }
}
