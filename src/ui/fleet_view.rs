//! The fleet page's charts, from the per-bucket rows: every bucket of the window on the x axis
//! (a bucket with no row is a zero, not a gap the line skips), one line per top agent.
use super::queries::{AgentRow, SeriesRow, Window};
use std::collections::HashMap;

/// Lines drawn per chart (the agents with the most cost inside loops).
pub(crate) const CHART_AGENTS: usize = 8;

/// A chart's lines: (agent, one value per bucket).
pub(crate) type Series = Vec<(String, Vec<f64>)>;

pub(crate) struct Charts {
    /// The buckets' starts, epoch seconds.
    pub(crate) xs: Vec<i64>,
    /// Whose lines are drawn, in the legend's order.
    pub(crate) agents: Vec<String>,
    /// Loop runs over runs ended, per bucket.
    pub(crate) loop_rate: Series,
    /// Cost inside loops (USD), per bucket.
    pub(crate) loop_cost: Series,
}

/// The start of every bucket that overlaps the window.
fn bucket_starts(w: &Window) -> Vec<i64> {
    let b = i64::from(w.bucket);
    let first = w.from.div_euclid(b) * b;
    (0..)
        .map(|i| first + i * b)
        .take_while(|x| *x < w.to)
        .collect()
}

/// `agents` comes ordered by cost inside loops; the first [`CHART_AGENTS`] get a line.
pub(crate) fn charts(w: &Window, agents: &[AgentRow], series: &[SeriesRow]) -> Charts {
    let xs = bucket_starts(w);
    let drawn: Vec<String> = agents
        .iter()
        .take(CHART_AGENTS)
        .map(|a| a.agent.clone())
        .collect();
    let by: HashMap<(&str, i64), &SeriesRow> = series
        .iter()
        .map(|r| ((r.agent.as_str(), r.t), r))
        .collect();
    let line = |agent: &str, value: fn(&SeriesRow) -> f64| -> Vec<f64> {
        xs.iter()
            .map(|x| by.get(&(agent, *x)).map_or(0.0, |r| value(r)))
            .collect()
    };
    let rate = |r: &SeriesRow| {
        if r.ended > 0 {
            r.loops as f64 / r.ended as f64
        } else {
            0.0
        }
    };
    Charts {
        loop_rate: drawn.iter().map(|a| (a.clone(), line(a, rate))).collect(),
        loop_cost: drawn
            .iter()
            .map(|a| (a.clone(), line(a, |r| r.loop_cost)))
            .collect(),
        agents: drawn,
        xs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str) -> AgentRow {
        AgentRow {
            agent: name.into(),
            ended: 0,
            loops: 0,
            loop_rate: 0.0,
            loop_cost: 0.0,
            cost: 0.0,
        }
    }

    fn bucket(t: i64, agent: &str, ended: u64, loops: u64, loop_cost: f64) -> SeriesRow {
        SeriesRow {
            t,
            agent: agent.into(),
            ended,
            loops,
            loop_cost,
        }
    }

    #[test]
    fn every_bucket_is_a_point_and_a_missing_one_is_zero() {
        let w = Window {
            from: 90,
            to: 300,
            bucket: 60,
            project: None,
        };
        let c = charts(
            &w,
            &[agent("b"), agent("a")],
            &[
                bucket(60, "a", 4, 1, 0.5),
                bucket(180, "a", 0, 0, 0.25),
                bucket(120, "b", 2, 2, 1.0),
            ],
        );
        assert_eq!(c.xs, vec![60, 120, 180, 240]);
        assert_eq!(c.agents, vec!["b", "a"]);
        assert_eq!(c.loop_rate[0], ("b".into(), vec![0.0, 1.0, 0.0, 0.0]));
        assert_eq!(c.loop_rate[1], ("a".into(), vec![0.25, 0.0, 0.0, 0.0]));
        assert_eq!(c.loop_cost[1], ("a".into(), vec![0.5, 0.0, 0.25, 0.0]));
    }

    #[test]
    fn only_the_top_agents_get_a_line() {
        let w = Window {
            from: 0,
            to: 60,
            bucket: 60,
            project: None,
        };
        let many: Vec<AgentRow> = (0..CHART_AGENTS + 3)
            .map(|i| agent(&format!("a{i}")))
            .collect();
        let c = charts(&w, &many, &[]);
        assert_eq!(c.agents.len(), CHART_AGENTS);
        assert_eq!(c.agents[0], "a0");
        assert_eq!(c.loop_cost.len(), CHART_AGENTS);
    }
}
