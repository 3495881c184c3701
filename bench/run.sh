#!/usr/bin/env bash
# Builds manifold, manifold-fixture, manifold-bench and manifold-relay and runs the bench
# suite (bench/main.go): the fixture direct over stdio and HTTP, and Manifold
# HTTP→stdio, HTTP→HTTP and stdio→stdio, and two reference relays (the least
# a Go proxy can do in the gateway's place), in alternation over rounds, with
# medians and ratios to direct. Arguments go to the suite, for example:
#
#   bash bench/run.sh                      # 5 rounds at 1, 16 and 64 sessions
#   bash bench/run.sh --short              # smoke test (what CI runs)
#   bash bench/run.sh --rounds 3 --sessions 1,8 --calls 2000 --json /tmp/bench.json
#   bash bench/run.sh --memory --rounds 3  # the gateway's memory: 4 MiB payloads, 1,000 idle sessions
#   bash bench/run.sh --memory --short     # its smoke test (what CI runs)
#   bash bench/run.sh --rounds 3 --gateway-env GOMAXPROCS=1   # settings for the gateway's processes (and the relays) only
#
# Everything listens on 127.0.0.1 only; every server is stopped after use.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for cmd in manifold manifold-fixture manifold-bench; do
  go build -o "$bin/$cmd" "./cmd/$cmd"
done
go build -o "$bin/manifold-relay" ./bench/relay
go build -o "$bin/bench" ./bench
"$bin/bench" --bin "$bin" "$@"
