//! The `eddy` binary: the only place `anyhow` is used.
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use eddy::config::Config;
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::sync::Arc;

// The engine allocates and frees a few small blocks per event (parsed payloads, canonical
// text); mimalloc's per-thread free lists do that in about half of glibc's time.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "eddy",
    version,
    about = "Catches AI agents stuck in loops, fleet-wide"
)]
struct Cli {
    /// TOML config file (also EDDY_CONFIG).
    #[arg(long, global = true, env = "EDDY_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Default)]
struct Common {
    /// Kafka bootstrap servers (EDDY_KAFKA_BROKERS).
    #[arg(long)]
    kafka_brokers: Option<String>,
    /// ClickHouse HTTP URL (EDDY_CLICKHOUSE_URL).
    #[arg(long)]
    clickhouse_url: Option<String>,
    /// ClickHouse database (EDDY_CLICKHOUSE_DATABASE).
    #[arg(long)]
    clickhouse_database: Option<String>,
    /// Input topic (EDDY_INPUT_TOPIC).
    #[arg(long)]
    input_topic: Option<String>,
    /// Output topic (EDDY_OUTPUT_TOPIC).
    #[arg(long)]
    output_topic: Option<String>,
    /// Consumer group id (EDDY_GROUP_ID).
    #[arg(long)]
    group_id: Option<String>,
}

impl Common {
    fn overrides(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        let pairs = [
            ("kafka_brokers", &self.kafka_brokers),
            ("clickhouse_url", &self.clickhouse_url),
            ("clickhouse_database", &self.clickhouse_database),
            ("input_topic", &self.input_topic),
            ("output_topic", &self.output_topic),
            ("group_id", &self.group_id),
        ];
        for (k, val) in pairs {
            if let Some(x) = val {
                v.push((k, x.clone()));
            }
        }
        v
    }
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// Load and validate; print the effective configuration as JSON with secrets masked.
    Check {
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the worker: consume steps, detect loops, publish signals, sink to ClickHouse.
    Run {
        #[command(flatten)]
        common: Common,
    },
    /// Run the detectors over JSONL v1 events (FILE or - for stdin); print output events.
    Replay {
        file: String,
        /// Hash runs to this many partitions, as the producer does (idle timeouts agree).
        #[arg(long, default_value_t = 1)]
        partitions: u32,
        /// Print a per-run summary table on stderr.
        #[arg(long)]
        summary: bool,
    },
    /// Validate the configuration (file + env + flags) and print it, secrets masked.
    Config {
        #[command(subcommand)]
        cmd: ConfigCmd,
    },
    /// Run a query of the analyst's pack (schemas/queries) and print a table.
    Query {
        /// Query name; `--list` shows them with their parameters.
        name: Option<String>,
        /// A parameter as name=value (repeatable); typed and escaped by eddy.
        #[arg(long = "param", value_parser = parse_param)]
        params: Vec<(String, String)>,
        /// List the queries and their parameters.
        #[arg(long)]
        list: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Apply ClickHouse migrations and exit.
    Migrate {
        #[command(flatten)]
        common: Common,
        /// Print the rendered DDL (cluster, retention) instead of applying it; no server needed.
        #[arg(long)]
        print: bool,
        /// With --print: render for this server version (e.g. 18.16.1 for the legacy form);
        /// default: the modern form.
        #[arg(long, requires = "print")]
        server_version: Option<String>,
    },
    /// Generate a simulated fleet of agent runs (JSONL file or Kafka topic).
    Simulate(eddy::simulate::SimulateArgs),
    /// Score the detectors on a labeled corpus (DIR holds events `*.jsonl` and `labels.jsonl`).
    Eval { dir: PathBuf },
    /// Serve keelwave's ingest API (agent runs and steps) and publish v1 events to the input topic.
    IngestHttp {
        #[command(flatten)]
        common: Common,
        /// Listen address (EDDY_INGEST_ADDR); API keys come from `[ingest_api_keys]`.
        #[arg(long)]
        addr: Option<String>,
    },
    /// Serve an OTLP traces receiver (OTLP/HTTP POST /v1/traces and OTLP/gRPC) and publish agent
    /// spans as v1 events.
    IngestOtlp {
        #[command(flatten)]
        common: Common,
        /// OTLP/HTTP listen address (EDDY_OTLP_ADDR; default 127.0.0.1:4318; "" turns it off).
        #[arg(long)]
        addr: Option<String>,
        /// OTLP/gRPC listen address (EDDY_OTLP_GRPC_ADDR; default 127.0.0.1:4317; "" turns it
        /// off).
        #[arg(long)]
        grpc_addr: Option<String>,
    },
    /// Watch the fleet: alert when an agent's (or a version's) loop rate or loop cost rises well
    /// above its own recent baseline (`[fleet]`; docs/fleet-alerts.md).
    FleetWatch {
        #[command(flatten)]
        common: Common,
        /// One pass over the windows closed now, then exit (cron-style use).
        #[arg(long)]
        once: bool,
        /// Never evaluate a window ending after this time (epoch seconds or RFC 3339).
        #[arg(long, value_parser = parse_until)]
        until: Option<u32>,
    },
    /// Serve the read-only loop explorer (fleet, runs, live signals, search) over ClickHouse.
    Ui {
        #[command(flatten)]
        common: Common,
        /// Listen address (EDDY_UI_ADDR; default 127.0.0.1:8090).
        #[arg(long)]
        listen: Option<String>,
        /// Serve every page without authentication (ui_insecure_open; EDDY_UI_INSECURE_OPEN).
        /// Without it, ui_tokens or ui_trusted_proxies must be set.
        #[arg(long)]
        insecure_open: bool,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    init_tracing();
    match cli.cmd {
        Cmd::Replay {
            file,
            partitions,
            summary,
        } => replay(cli.config.as_deref(), &file, partitions, summary),
        Cmd::Run { common } => {
            let cfg = Config::load(cli.config.as_deref(), &common.overrides())?;
            daemon(cfg, |cfg, stop| {
                eddy::worker::serve(cfg.kafka, cfg.clickhouse, cfg.worker, cfg.engine, stop)
            })
        }
        Cmd::Config {
            cmd: ConfigCmd::Check { common },
        } => {
            let cfg = Config::load(cli.config.as_deref(), &common.overrides())?;
            println!("{}", serde_json::to_string_pretty(&cfg.redacted())?);
            eprintln!("config: ok");
            Ok(())
        }
        Cmd::Query {
            name,
            params,
            list,
            common,
        } => {
            if list || name.is_none() {
                for n in eddy::query::names() {
                    let sql = eddy::query::sql_for(n, "99")?;
                    let ps: Vec<String> = eddy::query::params(sql)
                        .into_iter()
                        .map(|(p, t)| format!("{p}:{t}"))
                        .collect();
                    println!("{n:<26} {}", ps.join(" "));
                }
                return Ok(());
            }
            let name = name.unwrap_or_default();
            let cfg = Config::load(cli.config.as_deref(), &common.overrides())?;
            runtime()?.block_on(async {
                let client = eddy::sink::reader(&cfg.clickhouse).await?;
                let values = params.into_iter().collect();
                let table = eddy::query::execute(&client, &name, &values).await?;
                table.print(&mut std::io::stdout())?;
                Ok::<_, anyhow::Error>(())
            })
        }
        Cmd::Migrate {
            common,
            print,
            server_version,
        } => {
            let cfg = Config::load(cli.config.as_deref(), &common.overrides())?;
            if print {
                let ddl = eddy::sink::DdlOptions::new(&cfg.clickhouse, server_version.as_deref());
                print!("{}", ddl.script());
                return Ok(());
            }
            runtime()?.block_on(async {
                let sink = eddy::sink::ClickHouseSink::connect(&cfg.clickhouse).await?;
                let applied = sink.migrate().await?;
                eprintln!("migrations applied: {applied:?}");
                Ok::<_, anyhow::Error>(())
            })
        }
        Cmd::IngestHttp { common, addr } => {
            let mut overrides = common.overrides();
            overrides.extend(addr.map(|a| ("ingest_addr", a)));
            let cfg = Config::load(cli.config.as_deref(), &overrides)?;
            daemon(cfg, |cfg, stop| {
                eddy::ingest::serve(cfg.kafka, cfg.ingest, cfg.verdicts, stop)
            })
        }
        Cmd::IngestOtlp {
            common,
            addr,
            grpc_addr,
        } => {
            let mut overrides = common.overrides();
            overrides.extend(addr.map(|a| ("otlp_addr", a)));
            overrides.extend(grpc_addr.map(|a| ("otlp_grpc_addr", a)));
            let cfg = Config::load(cli.config.as_deref(), &overrides)?;
            daemon(cfg, |cfg, stop| {
                eddy::ingest::otlp::serve(cfg.kafka, cfg.ingest, stop)
            })
        }
        Cmd::Ui {
            common,
            listen,
            insecure_open,
        } => {
            let mut overrides = common.overrides();
            overrides.extend(listen.map(|a| ("ui_addr", a)));
            let mut cfg = Config::load(cli.config.as_deref(), &overrides)?;
            if insecure_open {
                // A flag's text would not load as a bool: set it here and check again.
                cfg.ui.insecure_open = true;
                cfg.validate()?;
            }
            daemon(cfg, |cfg, stop| {
                eddy::ui::serve(cfg.kafka, cfg.clickhouse, cfg.verdicts, cfg.ui, stop)
            })
        }
        Cmd::FleetWatch {
            common,
            once,
            until,
        } => {
            let cfg = Config::load(cli.config.as_deref(), &common.overrides())?;
            let opts = eddy::fleet::WatchOptions { once, until };
            let stats = daemon(cfg, |cfg, stop| {
                eddy::fleet::serve(cfg.kafka, cfg.clickhouse, cfg.fleet, opts, stop)
            })?;
            eprintln!(
                "fleet-watch: {} windows evaluated, {} alerts",
                stats.windows, stats.alerts
            );
            Ok(())
        }
        Cmd::Eval { dir } => {
            let cfg = Config::load(cli.config.as_deref(), &[])?;
            let report = eddy::eval::evaluate(&dir, Arc::new(cfg.engine))?;
            report.print(&mut std::io::stdout())?;
            Ok(())
        }
        Cmd::Simulate(args) => {
            let cfg = Config::load(cli.config.as_deref(), &[])?;
            runtime()?.block_on(eddy::simulate::produce_fleet(args, &cfg.kafka))?;
            Ok(())
        }
    }
}

fn parse_param(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .ok_or_else(|| format!("expected name=value, got `{s}`"))
}

fn parse_until(s: &str) -> Result<u32, String> {
    eddy::query::parse_datetime(s)
        .and_then(|t| u32::try_from(t).ok())
        .ok_or_else(|| format!("expected epoch seconds or RFC 3339, got `{s}`"))
}

/// Every daemon's start: the async runtime, the stop token (first signal, then the grace period
/// `shutdown_grace_ms`; `eddy::daemon`), then its work. Its admin server is its own to start,
/// through `eddy::daemon::admin_server`, as each knows when it is ready.
fn daemon<T, E, Fut>(
    cfg: Config,
    work: impl FnOnce(Config, tokio_util::sync::CancellationToken) -> Fut,
) -> Result<T>
where
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let grace = std::time::Duration::from_millis(cfg.worker.shutdown_grace_ms);
    runtime()?.block_on(async {
        let stop = eddy::daemon::shutdown_on_signal(grace);
        Ok(work(cfg, stop).await?)
    })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("EDDY_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("EDDY_LOG_FORMAT").is_ok_and(|v| v == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn replay(
    config: Option<&std::path::Path>,
    file: &str,
    partitions: u32,
    summary: bool,
) -> Result<()> {
    let cfg = Config::load(config, &[])?;
    let input: Box<dyn std::io::BufRead> = if file == "-" {
        Box::new(BufReader::new(std::io::stdin().lock()))
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("cannot open {file}"))?;
        Box::new(BufReader::with_capacity(1 << 20, f))
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut table = eddy::replay::SummaryTable::default();
    let stats = eddy::replay::replay(
        input,
        Arc::new(cfg.engine),
        partitions,
        |o| {
            if summary {
                table.add(o);
            }
            eddy::replay::write_jsonl(&mut out, o)
        },
        |line, why| eprintln!("line {line}: skipped: {why}"),
    )?;
    out.flush()?;
    if summary {
        table.print(&mut std::io::stderr())?;
    }
    eprintln!(
        "replayed {} events ({} malformed lines skipped), {} output events",
        stats.events, stats.malformed, stats.outputs
    );
    Ok(())
}
