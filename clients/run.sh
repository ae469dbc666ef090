#!/usr/bin/env bash
# Generates a client from proto/ with local plugins only (Debian's packages; no Buf registry,
# no PyPI, no Go module proxy) and runs its example against a server.
#
#   clients/run.sh gen    python|go        generate (and for Go, build) only; prints the build dir
#   clients/run.sh stubs  [OUT]            the Python package's committed stubs (+ .pyi) into
#                                          clients/python/src/palimpsest/v1 (or OUT/palimpsest/v1)
#   clients/run.sh test   python|go ADDR   the package's own tests against a running server
#   clients/run.sh python ADDR [ARGS...]   the agent-backend example (clients/python/agent.py, on the package)
#   clients/run.sh go     ADDR ARGS...     the surface observer (clients/go/observer)
#
# Generated code is not committed: it goes to $PALIMPSEST_CLIENTS_BUILD
# (default node_modules/.cache/palimpsest-clients/<lang>) and is regenerated on every run,
# so it can never drift from proto/. Go builds in GOPATH mode (GO111MODULE=off) against
# /usr/share/gocode (golang-google-grpc-dev, golang-google-protobuf-dev), fully offline;
# GOCACHE defaults to node_modules/.cache/go-build so rebuilds take well under a second.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/node_modules/.cache"
build_root=${PALIMPSEST_CLIENTS_BUILD:-$cache/palimpsest-clients}
buf="$root/node_modules/.bin/buf"
python=${PALIMPSEST_PYTHON:-/usr/bin/python3} # Debian's python3-grpcio / python3-protobuf live here

die() { echo "clients/run.sh: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "missing $1 (install with .ci/system-deps)"; }

# buf generate into a fresh temp dir next to the target, then swap it in (atomic for readers).
generate() { # template outdir paths...   (template: clients/<template>.yaml)
  local template=$1 out=$2; shift 2
  [ -x "$buf" ] || die "missing $buf (run npm ci)"
  local args=() p
  for p in "$@"; do args+=(--path "$p"); done
  mkdir -p "$(dirname "$out")"
  local tmp; tmp=$(mktemp -d "$out.tmp.XXXXXX")
  (cd "$root" && "$buf" generate --template "clients/$template.yaml" -o "$tmp" "${args[@]}")
  rm -rf "$out" && mv "$tmp" "$out"
}

gen_python() {
  need protoc; need grpc_python_plugin
  "$python" -c 'import grpc, google.protobuf' 2>/dev/null || die "$python lacks grpc/protobuf (apt-get install python3-grpcio python3-protobuf)"
  # grpc/health is left out on purpose: a generated top-level `grpc` package would collide
  # with grpcio's. Health checks need no stubs of ours (python3-grpcio's channel is enough).
  generate python/buf.gen "$build_root/python" proto/palimpsest/v1 proto/google/rpc
}

# The installable Python package ships its stubs (it must install offline, without protoc), so they
# are committed; the drift test regenerates them into a temp dir and compares.
stubs_python() { # outroot
  need protoc; need grpc_python_plugin; need protoc-gen-mypy; need protoc-gen-mypy_grpc
  local out=$1
  generate python/buf.stubs "$out.gen" proto/palimpsest/v1
  mkdir -p "$out/palimpsest"
  rm -rf "$out/palimpsest/v1" && mv "$out.gen/palimpsest/v1" "$out/palimpsest/v1" && rm -rf "$out.gen"
  # Only the service has gRPC code; protoc-gen-grpc writes empty modules for the message files.
  local f; for f in "$out"/palimpsest/v1/*_pb2_grpc.py "$out"/palimpsest/v1/*_pb2_grpc.pyi; do
    case "$f" in */service_pb2_grpc.py|*/service_pb2_grpc.pyi) ;; *) rm -f "$f" ;; esac
  done
  printf '"""Generated from proto/palimpsest/v1 by clients/run.sh stubs; do not edit."""\n' > "$out/palimpsest/v1/__init__.py"
}

gen_go() {
  need go; need protoc-gen-go; need protoc-gen-go-grpc
  [ -d /usr/share/gocode/src/google.golang.org/grpc ] || die "missing Go gRPC sources (apt-get install golang-google-grpc-dev)"
  # grpc-go's codec marshals through github.com/golang/protobuf; its 1.3 (pre-APIv2) runtime panics
  # on protoc-gen-go's APIv2 messages. 1.5 wraps APIv2.
  [ ! -e /usr/share/gocode/src/github.com/golang/protobuf/proto/table_unmarshal.go ] \
    || die "github.com/golang/protobuf is 1.3 (APIv1): apt-get install golang-github-golang-protobuf-1-5-dev"
  # Files land at their go_package path (palimpsest/gen/go/palimpsest/v1) under a GOPATH's src/.
  generate go/buf.gen "$build_root/go/gopath/src" proto/palimpsest/v1
  # The client package is importable as palimpsest/clients/go/palimpsest through a link to clients/.
  ln -sfn "$root/clients" "$build_root/go/gopath/src/palimpsest/clients"
  export GO111MODULE=off GOFLAGS= GOPATH="$build_root/go/gopath:/usr/share/gocode"
  export GOCACHE=${GOCACHE:-$cache/go-build}
  (cd "$root" && go build -o "$build_root/go/bin/observer" ./clients/go/observer)
}

cmd=${1:-}; shift || true
case "$cmd" in
  gen)
    lang=${1:-}; case "$lang" in
      python) gen_python; echo "$build_root/python" ;;
      go) gen_go; echo "$build_root/go" ;;
      *) die "usage: clients/run.sh gen python|go" ;;
    esac ;;
  stubs) stubs_python "${1:-$root/clients/python/src}" ;;
  test)
    lang=${1:-}; addr=${2:-}; [ -n "$addr" ] || die "usage: clients/run.sh test python|go ADDR"
    shift 2
    case "$lang" in
      python) PALIMPSEST_ADDR=$addr PYTHONPATH="$root/clients/python/src${PYTHONPATH:+:$PYTHONPATH}" \
                exec "$python" -m pytest -q -p no:cacheprovider "$root/clients/python/tests" "$@" ;;
      go) gen_go
          cd "$build_root/go/gopath/src/palimpsest/clients/go/palimpsest"
          go vet . && PALIMPSEST_ADDR=$addr exec go test -count=1 "$@" . ;;
      *) die "usage: clients/run.sh test python|go ADDR" ;;
    esac ;;
  python)
    [ $# -ge 1 ] || die "usage: clients/run.sh python ADDR [ARGS...]"
    # The example uses the package (palimpsest.client + its committed stubs), not generated stubs.
    PYTHONPATH="$root/clients/python/src${PYTHONPATH:+:$PYTHONPATH}" exec "$python" "$root/clients/python/agent.py" --addr "$@" ;;
  go)
    [ $# -ge 1 ] || die "usage: clients/run.sh go ADDR ARGS..."
    gen_go
    addr=$1; shift
    exec "$build_root/go/bin/observer" -addr "$addr" "$@" ;;
  *) die "usage: clients/run.sh gen python|go | python ADDR [ARGS...] | go ADDR ARGS..." ;;
esac
