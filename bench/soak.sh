#!/usr/bin/env bash
# The long fault soak: tests/soak.rs with its long schedule, rounds of every fault (broker
# SIGKILL and hangs, ClickHouse hang and refusal, latency, bandwidth, resets, timeouts, a
# worker killed mid-flush, both workers restarted) in a random order fixed by SEED, for
# MINUTES, both delivery modes at once on a private stack behind Toxiproxy. Prints the table
# of the time from each fault's end to lag 0 (p50 / max per fault and mode) and fails if a
# mode got stuck or an output differs from the offline replay.
#
#   scripts/bootstrap --dev          # once: builds Toxiproxy
#   bench/soak.sh [MINUTES] [SEED]   # default: 20, a new seed (printed; give it to repeat)
#
# Logs, timeline, stall reports and table.txt go to EDDY_SOAK_DIR (default
# $CARGO_TARGET_DIR/soak-long-SEED). The other EDDY_SOAK_* knobs of tests/soak.rs apply too
# (EDDY_SOAK_PORT_BASE to move its ports, EDDY_SOAK_KAFKA_DEBUG for librdkafka debug).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-20}
seed=${2:-$(date +%s)}
target=${CARGO_TARGET_DIR:-target}
export EDDY_SOAK_SCHEDULE=long EDDY_SOAK_MINUTES=$minutes EDDY_SOAK_SEED=$seed
export EDDY_SOAK_DIR=${EDDY_SOAK_DIR:-$target/soak-long-$seed}
echo "soak: $minutes minutes, seed $seed, logs in $EDDY_SOAK_DIR" >&2
cargo test --test soak -- --nocapture
