#!/usr/bin/env bash
# Generates a client from proto/ with local plugins only (Debian's packages; no Buf registry,
# no PyPI, no Go module proxy) and runs its example against a server.
#
#   clients/run.sh gen    python|go        generate (and for Go, vendor and build) only; prints the build dir
#   clients/run.sh vendor go               clients/go/vendor from Debian's Go sources (offline builds)
#   clients/run.sh stubs  [OUT]            the Python package's committed stubs (+ .pyi) into
#                                          clients/python/src/palimpsest/v1 (or OUT/palimpsest/v1)
#   clients/run.sh test   python|go ADDR   the package's own tests against a running server
#   clients/run.sh python ADDR [ARGS...]   the agent-backend example (clients/python/agent.py, on the package)
#   clients/run.sh go     ADDR ARGS...     the surface observer (clients/go/observer)
#
# Python's generated code for the example goes to $PALIMPSEST_CLIENTS_BUILD (default
# node_modules/.cache/palimpsest-clients/<lang>) and is regenerated on every run. The Go module
# (clients/go, palimpsest.dev/go) has its stubs committed (scripts/gen.sh) and builds in module
# mode with -mod=vendor, its vendor/ made from /usr/share/gocode, fully offline; GOCACHE defaults
# to node_modules/.cache/go-build so rebuilds take well under a second.
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

# clients/go is the Go module palimpsest.dev/go (go.mod; stubs committed in clients/go/gen by
# scripts/gen.sh). Offline, it builds with -mod=vendor from a vendor/ directory made here from
# Debian's Go sources (/usr/share/gocode: golang-google-grpc-dev, golang-google-protobuf-dev, ...):
# the packages the module and its tests import, grouped by the modules go.mod requires. The
# directory is not committed; it is rebuilt when its modules.txt would change.
go_env() {
  export GOFLAGS=-mod=vendor GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GO111MODULE=on
  export GOCACHE=${GOCACHE:-$cache/go-build}
}

vendor_go() {
  need go
  local gocode=/usr/share/gocode/src mod="$root/clients/go"
  [ -d "$gocode/google.golang.org/grpc" ] || die "missing Go gRPC sources (apt-get install golang-google-grpc-dev)"
  # grpc-go's codec marshals through github.com/golang/protobuf; its 1.3 (pre-APIv2) runtime panics
  # on protoc-gen-go's APIv2 messages. 1.5 wraps APIv2.
  [ ! -e "$gocode/github.com/golang/protobuf/proto/table_unmarshal.go" ] \
    || die "github.com/golang/protobuf is 1.3 (APIv1): apt-get install golang-github-golang-protobuf-1-5-dev"
  exec 9>"$mod/.vendor.lock"; flock 9 # the suite's Go tests vendor concurrently
  # The non-standard packages the module imports, found by go itself in GOPATH mode.
  local gp; gp=$(mktemp -d); mkdir -p "$gp/src/palimpsest.dev"; ln -s "$mod" "$gp/src/palimpsest.dev/go"
  local pkgs; pkgs=$(cd "$gp/src/palimpsest.dev/go" && GO111MODULE=off GOFLAGS= GOPATH="$gp:/usr/share/gocode" \
    GOCACHE=${GOCACHE:-$cache/go-build} go list -deps -test -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./... \
    | sed 's#^palimpsest.dev/go/vendor/##' | grep -v '^palimpsest.dev/go' | sort -u)
  rm -rf "$gp"
  # modules.txt: each required module (longest matching path) with its packages.
  local txt; txt=$(awk -v pkgs="$pkgs" -v gocode="$gocode" '
    /^require/ || /^\)/ { next }
    NF >= 2 && $1 != "module" && $1 != "go" { sub(/^require /, ""); mods[++n] = $1; ver[$1] = $2 }
    END {
      np = split(pkgs, P, "\n")
      for (i = 1; i <= np; i++) { best = ""
        for (j = 1; j <= n; j++) { m = mods[j]; if ((P[i] == m || index(P[i], m "/") == 1) && length(m) > length(best)) best = m }
        if (best == "") { print "no module in go.mod provides " P[i] > "/dev/stderr"; exit 1 }
        list[best] = list[best] P[i] "\n" }
      for (j = 1; j <= n; j++) { m = mods[j]; lang = ""
        # The language version of the module (its go.mod), which the compiler must use for it.
        while ((getline line < (gocode "/" m "/go.mod")) > 0) if (line ~ /^go [0-9]/) lang = "; go " substr(line, 4)
        printf "# %s %s\n## explicit%s\n%s", m, ver[m], lang, list[m] }
    }' "$mod/go.mod")
  if [ "$(cat "$mod/vendor/modules.txt" 2>/dev/null)" != "$txt" ]; then
    local tmp p f; tmp=$(mktemp -d "$mod/vendor.tmp.XXXXXX")
    for p in $pkgs; do
      [ -d "$gocode/$p" ] || die "missing Go package $p in $gocode (install its Debian golang-*-dev package)"
      mkdir -p "$tmp/$p"
      for f in "$gocode/$p"/*; do
        case "$f" in *_test.go) ;; *.go|*.s|*.h|*.c) cp "$f" "$tmp/$p/" ;; esac
      done
    done
    printf '%s\n' "$txt" > "$tmp/modules.txt"
    rm -rf "$mod/vendor" && mv "$tmp" "$mod/vendor"
  fi
  exec 9>&-
}

gen_go() {
  need go
  vendor_go
  go_env
  (cd "$root/clients/go" && go build -o "$build_root/go/bin/observer" ./observer)
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
  vendor) [ "${1:-}" = go ] || die "usage: clients/run.sh vendor go"; vendor_go ;;
  test)
    lang=${1:-}; addr=${2:-}; [ -n "$addr" ] || die "usage: clients/run.sh test python|go ADDR"
    shift 2
    case "$lang" in
      python) PALIMPSEST_ADDR=$addr PYTHONPATH="$root/clients/python/src${PYTHONPATH:+:$PYTHONPATH}" \
                exec "$python" -m pytest -q -p no:cacheprovider "$root/clients/python/tests" "$@" ;;
      go) vendor_go; go_env
          cd "$root/clients/go"
          go vet ./... && PALIMPSEST_ADDR=$addr exec go test -count=1 "$@" ./palimpsest ;;
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
