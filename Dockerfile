# syntax=docker/dockerfile:1
# eddy worker image: `docker build -t eddy .`, then `docker run eddy run` (the default command).
# The builder compiles librdkafka from source (rdkafka's cmake-build feature), hence the -dev
# packages; the runtime stage only carries their shared libraries.

FROM rust:1-bookworm AS builder
# Debian's package versions are not pinned: bookworm's security updates replace them.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        cmake libcurl4-openssl-dev libsasl2-dev libzstd-dev libssl-dev zlib1g-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
# llvm-profdata for the profile-guided build below.
RUN rustup component add llvm-tools
WORKDIR /src
COPY . .
# Profile-guided (scripts/build-pgo: instrumented build, a simulated fleet replayed as training,
# optimised build); bench/README.md ("Fifteenth round") has what it buys. Cache mounts keep the
# crates.io index and the target dir between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    scripts/build-pgo /usr/local/bin/eddy

FROM debian:bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates libcurl4 libsasl2-2 libsasl2-modules libzstd1 libssl3 zlib1g \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 eddy \
    && useradd --system --uid 10001 --gid eddy --home-dir /nonexistent --shell /usr/sbin/nologin eddy
COPY --from=builder /usr/local/bin/eddy /usr/local/bin/eddy
COPY eddy.example.toml /usr/share/doc/eddy/eddy.example.toml
USER 10001:10001
# Admin server: /metrics, /livez, /readyz.
EXPOSE 9464
ENV EDDY_LOG=info
ENTRYPOINT ["eddy"]
CMD ["run"]
