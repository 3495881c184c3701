#!/usr/bin/env bash
# Runs every test of the repository: formatting, vet, staticcheck, the Go tests with the
# race detector (unit, fuzz seed corpora, end-to-end with real processes),
# and the Node harness self-test. On a fresh machine it first installs the
# pinned npm test dependencies (test/node, test/conformance and test/console
# lock files) and, in CI (CI=true), Chromium for the console's browser test.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null || { echo "test.sh: $1 is required" >&2; exit 1; }; }
need go
need node
need npm

for dir in test/node test/conformance test/console; do
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    echo "== npm ci ($dir)"
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  fi
done

# The console's browser test (test/e2e/console_test.go) drives the Debian
# package chromium. In CI it must run, so a missing one is installed; on a
# developer's machine the test skips without it.
if ! command -v chromium >/dev/null; then
  if [ "${CI:-}" = true ]; then
    echo "== apt-get install chromium"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else
    echo "test.sh: chromium is not installed; the console's browser test skips (apt-get install chromium)" >&2
  fi
fi

# The shared store's tests (internal/cluster, internal/pins, internal/upcred,
# gateway, test/e2e: pins, tokens and sign-ins across replicas) run Debian's redis-server, and
# the cluster e2e test also goes through HAProxy when it is installed: CI
# installs both; elsewhere the store test skips without redis-server.
if ! command -v redis-server >/dev/null || ! command -v haproxy >/dev/null; then
  if [ "${CI:-}" = true ]; then
    echo "== apt-get install redis-server haproxy"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server haproxy
  elif ! command -v redis-server >/dev/null; then
    echo "test.sh: redis-server is not installed; the shared-store tests skip (apt-get install redis-server)" >&2
  fi
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './test/node/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "== go vet"
go vet ./...

# Pinned staticcheck (2026.2.2, for Go 1.26); go run fetches it through the
# module proxy on first use. The SDK's deprecated sampling, roots and
# logging APIs are used only through internal/mcpx/deprecated.go.
echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

echo "== go test -race"
go test -race -count=1 -timeout 15m ./...

# deploy/ is a module of its own (Helm, the Kubernetes API types, go-containerregistry and
# compose-go stay out of the gateway's go.mod): its tests render the chart, build the image
# offline as an OCI layout and load the compose demo.
echo "== deploy (vet, staticcheck, test)"
(cd deploy && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... && go test -count=1 -timeout 10m ./...)

# Every parser of untrusted input is fuzzed briefly on each run; a failure
# leaves its input under testdata/fuzz for `go test` to replay.
fuzztime=${FUZZTIME:-5s}
if [ "$fuzztime" != "0" ]; then
  echo "== fuzz ($fuzztime each)"
  fuzz() { go test -run '^$' -fuzz "^${target#*:}\$" -fuzztime "$fuzztime" "${target%%:*}" 2>&1; }
  for target in \
    ./policy:FuzzPattern ./policy:FuzzDecide \
    ./internal/authn:FuzzBearerToken ./internal/authn:FuzzAuthenticate \
    ./namespacing:FuzzNonCanonicalURI ./namespacing:FuzzURIAgainstWHATWG ./namespacing:FuzzName ./namespacing:FuzzURI \
    ./config:FuzzParse ./config:FuzzEnvOverride ./gateway:FuzzStdio ./gateway:FuzzRequestState \
    ./gateway:FuzzUpstreamNotFound \
    ./internal/audit:FuzzArguments ./internal/redact:FuzzText \
    ./upstream:FuzzIDScanner ./upstream:FuzzSSEBody ./upstream:FuzzSSEReader \
    ./internal/envelope:FuzzScan ./internal/envelope:FuzzDuplicateKeys ./internal/envelope:FuzzMembers \
    ./plugins:FuzzDecodeList ./gateway:FuzzPluginResult ./discovery:FuzzParseQuery \
    ./plugins/builtin/redact:FuzzJSON ./plugins/builtin/redact:FuzzText \
    ./plugins/builtin/guard:FuzzCheck ./plugins/builtin/guard:FuzzConfig \
    ./plugins/builtin/guard:FuzzURLAllowList ./plugins/builtin/guard:FuzzPathTraversal \
    ./internal/upcred:FuzzFileStoreOpen \
    ./config:FuzzParseRate ./internal/pins:FuzzParse \
    ./internal/cluster:FuzzOpen ./internal/cluster:FuzzHop \
    ./internal/cluster:FuzzOpenSignIn \
    ./gateway:FuzzOpenSignIn ./internal/oidc:FuzzIDTokenNonce \
    ./upstream:FuzzStdioConn; do
    out=$(fuzz) && continue
    # Go 1.26's fuzz coordinator can fail a target with a bare "context
    # deadline exceeded" right at -fuzztime, having found nothing and
    # written no input (golang/go#75804, fixed in Go 1.27). Run such a
    # target again, up to three times (on a loaded machine the race can
    # recur); a real failure writes its input and fails every time.
    deadline_race() { echo "$out" | grep -q '^    context deadline exceeded$' && ! echo "$out" | grep -q 'Failing input written'; }
    for retry in 1 2 3; do
      deadline_race || break
      echo "fuzz ${target}: Go fuzz coordinator deadline race (golang/go#75804); running it again ($retry/3)"
      out=$(fuzz) && continue 2
    done
    echo "$out" | tail -40 >&2
    echo "fuzz ${target} failed; rerun: go test -run '^$' -fuzz '^${target#*:}\$' ${target%%:*}" >&2
    exit 1
  done
fi

echo "== node harness self-test"
(cd test/node && node --test selftest.test.mjs)
