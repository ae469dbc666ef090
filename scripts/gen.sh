#!/usr/bin/env bash
# Regenerates from proto/ with local plugins only (no remote Buf registry):
#   gen/                           ts-proto, protobuf-es and the descriptor set (buf.gen.yaml)
#   clients/go/gen/                the Go module's stubs (clients/go/buf.gen.yaml; Debian's
#                                  protoc-gen-go and protoc-gen-go-grpc)
#   clients/typescript/src/gen/    the @palimpsest/client package's copy of the ts-proto stubs
# `scripts/gen.sh OUT` writes gen/ to OUT instead (the drift check compares the two) and leaves the
# clients alone; `scripts/gen.sh OUT CLIENTS` also writes CLIENTS/go/gen and CLIENTS/typescript/src/gen.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gen}"
clients="${2:-}"
if [ $# -eq 0 ]; then clients=clients; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npx buf generate -o "$tmp"
if [ -f scripts/gen-extra.sh ]; then scripts/gen-extra.sh "$tmp"; fi
# gen/descriptor.binpb (the module as a FileDescriptorSet, for server reflection) comes from the
# local plugin scripts/protoc-gen-descriptor-set.mjs listed in buf.gen.yaml.
if [ -n "$clients" ]; then
  npx buf generate --template clients/go/buf.gen.yaml -o "$tmp/go" --path proto/palimpsest/v1
  mkdir -p "$tmp/ts"
  for d in palimpsest/v1 google/rpc google/protobuf; do
    mkdir -p "$tmp/ts/$d" && cp "$tmp/gen/$d"/*.ts "$tmp/ts/$d/"
  done
  mkdir -p "$clients/go" "$clients/typescript/src"
  rm -rf "$clients/go/gen" && mv "$tmp/go" "$clients/go/gen"
  rm -rf "$clients/typescript/src/gen" && mv "$tmp/ts" "$clients/typescript/src/gen"
fi
rm -rf "$out" && mkdir -p "$(dirname "$out")" && mv "$tmp/gen" "$out"
