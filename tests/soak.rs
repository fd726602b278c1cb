//! Fault soak: does eddy keep going, not only lose nothing, when the broker crashes or hangs,
//! ClickHouse hangs or refuses, the links get slow, reset or stall, and workers are killed
//! mid-flush or restarted together? Both delivery modes at once, each with two workers of one
//! group, on a private stack whose Kafka and ClickHouse sit behind Toxiproxy
//! (tests/common/soak/mod.rs says how it runs and what it checks).
//!
//! Its own CI stage (`cargo test --test soak`, after `scripts/bootstrap --dev`, which builds
//! Toxiproxy); not part of scripts/test. It starts and stops its own servers, never the shared
//! stack's. Knobs, all optional:
//!
//! - `EDDY_SOAK_SCHEDULE=long` with `EDDY_SOAK_MINUTES` (20) and `EDDY_SOAK_SEED` (new each
//!   run, printed): rounds of every fault in a seeded random order (bench/soak.sh). Default:
//!   the short schedule, every fault once, a few minutes.
//! - `EDDY_SOAK_FAULTS`: only these faults (comma-separated: broker-kill, broker-hang,
//!   broker-hang-kill, clickhouse-hang, clickhouse-refused, kafka-latency-500ms,
//!   kafka-latency-5s, kafka-bandwidth, kafka-reset-peer, kafka-timeout, worker-kill-in-flush,
//!   workers-restart); e.g. `EDDY_SOAK_FAULTS=broker-hang EDDY_SOAK_SCHEDULE=long
//!   EDDY_SOAK_MINUTES=5` repeats one fault as a reproducer.
//! - `EDDY_SOAK_RUNS`: simulated runs per mode (600 short, 6000 long).
//! - `EDDY_SOAK_STUCK_S` (90 short, 120 long): a mode not caught up (lag 0) with every worker
//!   holding partitions that long after a fault's end is stuck: reported, the test fails.
//!   `EDDY_SOAK_GIVE_UP_S` (90 short, 360 long): then its idle workers are restarted, as an
//!   operator would, and after as long again the mode is given up on.
//! - `EDDY_SOAK_KAFKA_DEBUG` (`cgrp,eos`): librdkafka debug contexts in the worker logs (empty:
//!   none; `cgrp,eos,protocol,broker` to chase a stall).
//! - `EDDY_SOAK_KAFKA_PROPS` (`key=value,...`): more librdkafka properties for the workers'
//!   consumer and producer, to try a setting against the faults.
//! - `EDDY_SOAK_MODES` (`at_least_once,exactly_once`), `EDDY_SOAK_PORT_BASE` (29300, ports up
//!   to base + 33), `EDDY_SOAK_DIR` (logs, timeline, stall reports, table; default under
//!   cargo's target tmp dir), `EDDY_SOAK_STACK_DIR`, `EDDY_TOXIPROXY_SERVER`.
mod common;
#[path = "common/soak/mod.rs"]
mod soak;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_soak() {
    soak::run(soak::Plan::from_env()).await;
}
