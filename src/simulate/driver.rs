//! The `eddy simulate` command: generate the fleet, write it to a file or the input topic,
//! write the labels if asked, and say what was made.
use super::args::SimulateArgs;
use super::fleet::{generate_fleet_with, weights, Fleet, RunTruth};
use super::kind::Kind;
use super::progress::Progress;
use crate::config::KafkaConfig;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;

#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "--mix leaves no {0} scenario with a positive weight, but the loop rate asks for some"
    )]
    EmptyMix(&'static str),
    #[error(transparent)]
    Emit(#[from] crate::emit::EmitError),
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
}

fn labels_line(t: &RunTruth) -> String {
    json!({"run_id": t.run_id, "looping": t.kind.loops(), "kind": t.kind.detector().unwrap_or("healthy"),
           "loop_start": t.loop_from, "evident_at": t.evident_at})
    .to_string()
}

/// Generates a fleet and produces its events to the input topic.
pub async fn produce_fleet(args: SimulateArgs, cfg: &KafkaConfig) -> Result<(), SimulateError> {
    if args.loop_rate > 0.0 && weights(&args, true).is_empty() {
        return Err(SimulateError::EmptyMix("looping"));
    }
    if args.loop_rate < 1.0 && weights(&args, false).is_empty() {
        return Err(SimulateError::EmptyMix("healthy"));
    }
    // Generating is most of the time when writing to a file (about 10 s per 100k runs).
    let mut gen = Progress::new(args.runs, "generating", "runs", 10_000);
    let fleet = generate_fleet_with(&args, || gen.tick());
    gen.finish();
    let total = fleet.events.len();
    let write_err = |p: &std::path::Path| {
        let p = p.display().to_string();
        move |source| SimulateError::Write {
            path: p.clone(),
            source,
        }
    };
    let destination = match &args.out {
        Some(path) => {
            let werr = write_err(path);
            let mut w: Box<dyn Write> = if path.as_os_str() == "-" {
                Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
            } else {
                Box::new(std::io::BufWriter::new(
                    std::fs::File::create(path).map_err(&werr)?,
                ))
            };
            let mut bar = Progress::new(total, "writing", "events", 1_000_000);
            for (_, _, line) in &fleet.events {
                w.write_all(line.as_bytes()).map_err(&werr)?;
                w.write_all(b"\n").map_err(&werr)?;
                bar.tick();
            }
            w.flush().map_err(&werr)?;
            bar.finish();
            path.display().to_string()
        }
        None => {
            crate::source::ensure_topics(cfg).await?;
            let mut emitter = crate::emit::Producer::plain(cfg)?;
            let mut bar = Progress::new(total, "producing", "events", 100_000);
            for (i, (_, run_id, line)) in fleet.events.iter().enumerate() {
                emitter.send_raw(&cfg.topics.input, run_id.as_bytes(), line.as_bytes())?;
                if (i + 1) % 20_000 == 0 {
                    emitter.flush().await?;
                }
                bar.tick();
            }
            emitter.flush().await?;
            bar.finish();
            format!("topic {}", cfg.topics.input)
        }
    };
    if let Some(path) = &args.labels {
        let werr = write_err(path);
        let mut w = std::io::BufWriter::new(std::fs::File::create(path).map_err(&werr)?);
        for t in &fleet.runs {
            writeln!(w, "{}", labels_line(t)).map_err(&werr)?;
        }
        w.flush().map_err(&werr)?;
    }
    eprint!("{}", summary(&fleet, &args, &destination));
    Ok(())
}

/// The closing summary: what was generated, by scenario, and the shape of its steps.
pub fn summary(fleet: &Fleet, args: &SimulateArgs, destination: &str) -> String {
    let mut by_kind: BTreeMap<Kind, usize> = BTreeMap::new();
    for r in &fleet.runs {
        *by_kind.entry(r.kind).or_default() += 1;
    }
    let looping = fleet.runs.iter().filter(|r| r.kind.loops()).count();
    let multi = fleet.runs.iter().filter(|r| r.kind.multi_agent()).count();
    let unfinished = fleet.runs.iter().filter(|r| !r.finished).count();
    let bytes: usize = fleet.events.iter().map(|(_, _, l)| l.len() + 1).sum();
    let (mut thinks, mut tools) = (0usize, 0usize);
    for (_, _, l) in &fleet.events {
        if l.contains("\"step_type\":\"think\"") {
            thinks += 1;
        } else if l.contains("\"step_type\":\"tool_call\"") {
            tools += 1;
        }
    }
    let events = fleet.events.len();
    let mut s = format!(
        "simulate: {} runs ({looping} looping by construction, {multi} multi-agent, {unfinished} left open), \
         {events} events, {} bytes/event, seed {} -> {destination}\n",
        fleet.runs.len(),
        bytes.checked_div(events).unwrap_or(0),
        args.seed,
    );
    s.push_str(&format!(
        "simulate: steps: {tools} tool calls, {thinks} thoughts\nsimulate: runs by scenario:"
    ));
    for (k, n) in &by_kind {
        s.push_str(&format!(" {}={n}", k.name()));
    }
    s.push('\n');
    s
}
