//! Spans/s through `eddy ingest-otlp`, over OTLP/HTTP and OTLP/gRPC, against the real local
//! broker.
//!
//!   eval "$(scripts/stack env)"
//!   cargo bench --bench otlp -- [--spans N] [--batch B] [--connections C] [--repeat K]
//!                               [--transport http|grpc|both] [--eddy PATH]
//!   cargo bench --bench otlp -- --spans 2000 --repeat 1        # smoke
//!
//! Starts the receiver (the release binary of this bench build, or `--eddy PATH`) on fresh
//! topics, then sends N agent spans (GenAI tool and model spans, 20 per trace) as protobuf
//! export requests of B spans over C keep-alive connections, K times per transport: HTTP/1.1
//! POSTs, and gRPC `Export` calls with opentelemetry-proto's generated client. A request counts
//! when its answer arrived, i.e. when Kafka acknowledged its events. Prints spans/s,
//! min/median/max per transport. Nothing here asserts on timings.
use eddy::config::Config;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Args {
    spans: usize,
    batch: usize,
    connections: usize,
    repeat: usize,
    transport: String,
    eddy: String,
}

fn args() -> Args {
    let mut a = Args {
        spans: 200_000,
        batch: 512,
        connections: 4,
        repeat: 5,
        transport: "both".into(),
        eddy: env!("CARGO_BIN_EXE_eddy").to_owned(),
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let num = |i: usize| -> usize {
            v.get(i + 1)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{} needs a number", v[i]))
        };
        match v[i].as_str() {
            "--spans" => a.spans = num(i),
            "--batch" => a.batch = num(i).max(1),
            "--connections" => a.connections = num(i).max(1),
            "--repeat" => a.repeat = num(i).max(1),
            "--eddy" => a.eddy = v.get(i + 1).cloned().expect("--eddy needs a path"),
            "--transport" => {
                a.transport = v.get(i + 1).cloned().expect("--transport needs a value");
                assert!(
                    ["http", "grpc", "both"].contains(&a.transport.as_str()),
                    "--transport http, grpc or both"
                );
            }
            // `cargo bench` passes --bench; ignore what is not ours.
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
    }
}

/// Span `n` of repetition `rep`: 20 spans per trace, alternating model and tool calls.
fn span(rep: usize, n: usize, t0: u64) -> Span {
    let trace = (rep as u128) << 64 | (n / 20) as u128 | 1 << 127;
    let tool = n % 2 == 1;
    let start = t0 + n as u64 * 1_000_000;
    let mut attributes = if tool {
        vec![
            kv("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.name", "web_search"),
            kv(
                "gen_ai.tool.call.arguments",
                &format!(r#"{{"q":"query {}"}}"#, n % 7),
            ),
            kv("gen_ai.tool.call.result", r#"{"results":["a","b","c"]}"#),
        ]
    } else {
        vec![
            kv("gen_ai.operation.name", "chat"),
            kv("gen_ai.output.messages", "I should look this up once more"),
        ]
    };
    attributes.push(kv("gen_ai.agent.name", "bench-agent"));
    Span {
        trace_id: trace.to_be_bytes().to_vec(),
        span_id: ((n as u64) << 8 | 1).to_be_bytes().to_vec(),
        parent_span_id: vec![0, 0, 0, 0, 0, 0, 0, 1],
        name: if tool {
            "execute_tool web_search"
        } else {
            "chat"
        }
        .into(),
        start_time_unix_nano: start,
        end_time_unix_nano: start + 500_000,
        attributes,
        ..Span::default()
    }
}

/// The export requests of repetition `rep` (each transport's runs use their own `rep`s, so no
/// run re-sends another's spans).
fn requests(a: &Args, rep: usize) -> Vec<ExportTraceServiceRequest> {
    let t0 = 1_767_225_600_000_000_000u64 + rep as u64 * 3_600_000_000_000;
    (0..a.spans)
        .collect::<Vec<_>>()
        .chunks(a.batch)
        .map(|c| ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("eddy.project.id", "bench")],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans: c.iter().map(|&n| span(rep, n, t0)).collect(),
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        })
        .collect()
}

fn bodies(a: &Args, rep: usize) -> Vec<Vec<u8>> {
    requests(a, rep)
        .iter()
        .map(Message::encode_to_vec)
        .collect()
}

/// One gRPC connection exporting `reqs` one after the other, as an SDK's batch processor does.
async fn export_all(addr: String, reqs: Vec<ExportTraceServiceRequest>) {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    let mut c = TraceServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connect to the gRPC receiver");
    for r in reqs {
        c.export(r).await.expect("export answered OK");
    }
}

/// One keep-alive HTTP/1.1 connection: a bench client needs nothing more, and this keeps the
/// client's own cost out of the figure.
fn post_all(addr: &str, bodies: &[Vec<u8>]) {
    let mut s = TcpStream::connect(addr).expect("connect to the receiver");
    s.set_nodelay(true).ok();
    let mut r = BufReader::new(s.try_clone().expect("clone stream"));
    for b in bodies {
        write!(
            s,
            "POST /v1/traces HTTP/1.1\r\nHost: bench\r\nContent-Type: application/x-protobuf\r\n\
             Content-Length: {}\r\n\r\n",
            b.len()
        )
        .and_then(|_| s.write_all(b))
        .expect("send");
        let mut line = String::new();
        r.read_line(&mut line).expect("status line");
        assert!(line.contains(" 200 "), "receiver answered {line:?}");
        let mut len = 0usize;
        loop {
            line.clear();
            r.read_line(&mut line).expect("header");
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().expect("content-length");
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).expect("body");
    }
}

fn main() {
    let a = args();
    let brokers = std::env::var("EDDY_KAFKA_BROKERS").unwrap_or_else(|_| {
        panic!("EDDY_KAFKA_BROKERS is unset: run `eval \"$(scripts/stack env)\"` first")
    });
    let nonce = format!("otlpbench_{}", std::process::id());
    let mut cfg = Config::default();
    cfg.kafka.brokers = brokers;
    cfg.kafka.topics.input = format!("b.{nonce}.steps");
    cfg.kafka.topics.output = format!("b.{nonce}.signals");
    cfg.kafka.topics.dlq = format!("b.{nonce}.dlq");
    cfg.kafka.group_id = format!("b.{nonce}.group");
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port()
    };
    let addr = format!("127.0.0.1:{}", free());
    let grpc_addr = format!("127.0.0.1:{}", free());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("otlp.toml");
    std::fs::write(
        &path,
        format!(
            "kafka_brokers = {:?}\ninput_topic = {:?}\noutput_topic = {:?}\ndlq_topic = {:?}\n\
             group_id = {:?}\notlp_addr = {addr:?}\notlp_grpc_addr = {grpc_addr:?}\n",
            cfg.kafka.brokers,
            cfg.kafka.topics.input,
            cfg.kafka.topics.output,
            cfg.kafka.topics.dlq,
            cfg.kafka.group_id
        ),
    )
    .expect("write config");
    let mut rx = Receiver(
        Command::new(&a.eddy)
            .args(["ingest-otlp", "--config"])
            .arg(&path)
            .env("EDDY_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn eddy ingest-otlp"),
    );
    let start = Instant::now();
    while TcpStream::connect(&addr).is_err() {
        assert!(
            rx.0.try_wait().ok().flatten().is_none(),
            "eddy ingest-otlp exited"
        );
        assert!(start.elapsed() < Duration::from_secs(60), "receiver not up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A warm-up request: topic metadata and the producer's connections are not measured. Its
    // repetition number, `repeat`, gives ids none of the measured runs use.
    let warmup = Args {
        spans: 20,
        ..args()
    };
    post_all(&addr, &bodies(&warmup, a.repeat));

    println!(
        "otlp: {} spans/run in batches of {} over {} connections, {} runs per transport",
        a.spans, a.batch, a.connections, a.repeat
    );
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    for (transport, first_rep) in [("http", 0), ("grpc", a.repeat + 1)] {
        if a.transport != "both" && a.transport != transport {
            continue;
        }
        let mut rates = Vec::new();
        for rep in first_rep..first_rep + a.repeat {
            let per = a.spans.div_ceil(a.batch).div_ceil(a.connections).max(1);
            let secs = if transport == "http" {
                let all = bodies(&a, rep);
                let t = Instant::now();
                std::thread::scope(|s| {
                    for chunk in all.chunks(per) {
                        let addr = &addr;
                        s.spawn(move || post_all(addr, chunk));
                    }
                });
                t.elapsed().as_secs_f64()
            } else {
                let all = requests(&a, rep);
                let chunks: Vec<Vec<_>> = all.chunks(per).map(<[_]>::to_vec).collect();
                let t = Instant::now();
                rt.block_on(async {
                    let tasks: Vec<_> = chunks
                        .into_iter()
                        .map(|c| tokio::spawn(export_all(grpc_addr.clone(), c)))
                        .collect();
                    for task in tasks {
                        task.await.expect("exporter task");
                    }
                });
                t.elapsed().as_secs_f64()
            };
            let rate = a.spans as f64 / secs;
            println!(
                "  {transport} run {}: {:.0} spans/s ({secs:.2} s)",
                rep - first_rep + 1,
                rate
            );
            rates.push(rate);
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "otlp receiver ({transport}): spans/s min {:.0} / median {:.0} / max {:.0}",
            rates[0],
            rates[rates.len() / 2],
            rates[rates.len() - 1]
        );
    }
}

/// The receiver process, stopped however the bench ends (a panic included).
struct Receiver(std::process::Child);

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
