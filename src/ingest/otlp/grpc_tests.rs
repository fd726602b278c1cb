//! OTLP/gRPC over a real socket with opentelemetry-proto's generated client: the key, size,
//! compression and retry rules of the HTTP receiver, as gRPC status codes.
use super::tests::{request, tool, T0};
use super::*;
use crate::contract::decode as decode_v1;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;

/// What the stand-in publisher does with each message.
#[derive(Clone, Copy)]
enum Broker {
    Ack,
    Fail,
}

/// A gRPC receiver on a free port, its publish queue (`depth`) served by a stand-in broker;
/// returns the client and the payloads the broker took.
async fn start(
    keys: &[(&str, &str)],
    depth: usize,
    broker: Option<Broker>,
) -> (
    TraceServiceClient<Channel>,
    tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    CancellationToken,
) {
    let mut cfg = IngestConfig::default();
    for (k, p) in keys {
        cfg.api_keys.insert(k.to_string(), p.to_string());
    }
    let (tx, mut jobs) = mpsc::channel::<Job>(depth);
    let (seen_tx, seen) = tokio::sync::mpsc::unbounded_channel();
    if let Some(broker) = broker {
        tokio::spawn(async move {
            while let Some(job) = jobs.recv().await {
                let _ = seen_tx.send(job.payload);
                let _ = job.done.send(match broker {
                    Broker::Ack => Ok(()),
                    Broker::Fail => Err("broker down".into()),
                });
            }
        });
    } else {
        // Nobody takes messages: the queue fills.
        std::mem::forget(jobs);
    }
    let rx = Arc::new(Receiver {
        keys: crate::ingest::key_table(&cfg).unwrap(),
        default_project: "d".into(),
        jobs: tx,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(grpc::serve(listener, rx, stop.clone()));
    let client = TraceServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
        .max_encoding_message_size(64 << 20);
    (client, seen, stop)
}

fn with_key(
    req: ExportTraceServiceRequest,
    key: Option<&str>,
) -> tonic::Request<ExportTraceServiceRequest> {
    let mut r = tonic::Request::new(req);
    if let Some(k) = key {
        r.metadata_mut()
            .insert("authorization", format!("Bearer {k}").parse().unwrap());
    }
    r
}

#[tokio::test]
async fn a_key_in_the_metadata_is_required_and_names_the_project() {
    let (mut client, mut seen, _stop) =
        start(&[("kw_SECRET", "keyed")], 64, Some(Broker::Ack)).await;
    let req = request(Some("res-proj"), vec![tool(2, T0, "{}")]);
    for key in [None, Some("kw_WRONG")] {
        let err = client.export(with_key(req.clone(), key)).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");
    }
    // The other spelling ingest-http accepts works too.
    let mut r = tonic::Request::new(req.clone());
    r.metadata_mut()
        .insert("x-api-key", "kw_SECRET".parse().unwrap());
    let resp = client.export(r).await.unwrap().into_inner();
    assert_eq!(resp.partial_success, None);
    let payload = seen.recv().await.unwrap();
    assert_eq!(decode_v1(&payload).unwrap().key().project_id, "keyed");
}

#[tokio::test]
async fn compressed_requests_are_taken_and_partial_success_is_reported() {
    let (client, mut seen, _stop) = start(&[], 64, Some(Broker::Ack)).await;
    let mut bad = tool(3, T0 + 10, "{}");
    bad.span_id = vec![1, 2];
    let req = request(Some("p"), vec![tool(2, T0, r#"{"q":"x"}"#), bad]);
    for enc in [CompressionEncoding::Gzip, CompressionEncoding::Deflate] {
        let mut c = client.clone().send_compressed(enc);
        let resp = c.export(req.clone()).await.unwrap().into_inner();
        let partial = resp.partial_success.expect("one span rejected");
        assert_eq!(partial.rejected_spans, 1);
        let payload = seen.recv().await.unwrap();
        let ev = decode_v1(&payload).unwrap();
        assert_eq!(ev.key().project_id, "p");
        assert_eq!(ev.key().run_id, hex::encode(super::tests::TRACE));
    }
}

#[tokio::test]
async fn the_http_receivers_size_limits_hold() {
    let (client, _seen, _stop) = start(&[], 64, Some(Broker::Ack)).await;
    // Over 1 MiB on the wire, uncompressed: refused (not retryable).
    let mut big = tool(2, T0, "{}");
    big.name = "x".repeat(MAX_BODY_BYTES);
    let err = client
        .clone()
        .export(request(None, vec![big.clone()]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("larger than"), "{}", err.message());
    // The same span gzipped is small on the wire: taken.
    let mut gz = client.clone().send_compressed(CompressionEncoding::Gzip);
    gz.export(request(None, vec![big])).await.unwrap();
    // Over 16 MiB once decompressed: refused.
    let mut huge = tool(2, T0, "{}");
    huge.name = "x".repeat(MAX_DECODED_BYTES);
    let req = request(None, vec![huge]);
    assert!(req.encoded_len() > MAX_DECODED_BYTES);
    let err = gz.export(req).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
}

/// The RetryInfo delay of a status, as the Go exporter (status details) and the Python one
/// (`google.rpc.retryinfo-bin`) read it.
fn retry_delays(st: &tonic::Status) -> (Option<std::time::Duration>, Option<std::time::Duration>) {
    use tonic_types::StatusExt;
    let details = st.get_details_retry_info().and_then(|r| r.retry_delay);
    let trailer = st
        .metadata()
        .get_bin("google.rpc.retryinfo-bin")
        .and_then(|v| v.to_bytes().ok())
        .and_then(|b| tonic_types::pb::RetryInfo::decode(b).ok())
        .and_then(|r| r.retry_delay)
        .and_then(|d| std::time::Duration::try_from(d).ok());
    (details, trailer)
}

#[tokio::test]
async fn kafka_trouble_is_answered_with_a_code_exporters_retry_after_retry_info() {
    let one = Some(std::time::Duration::from_secs(1));
    let (mut client, _seen, _stop) = start(&[], 64, Some(Broker::Fail)).await;
    let err = client
        .export(request(None, vec![tool(2, T0, "{}")]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert_eq!(retry_delays(&err), (one, one));
    // A full publish queue: RESOURCE_EXHAUSTED, which exporters retry only with RetryInfo.
    let (mut client, _seen, _stop) = start(&[], 1, None).await;
    let spans = (2..5).map(|i| tool(i, T0 + u64::from(i), "{}")).collect();
    let err = client.export(request(None, spans)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    assert_eq!(retry_delays(&err), (one, one));
}
