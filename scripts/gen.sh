#!/usr/bin/env bash
# Regenerates gen/ from proto/ with local plugins only (no remote Buf registry).
# `scripts/gen.sh [OUT]` writes to OUT instead of gen/ (the drift check compares the two).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-gen}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npx buf generate -o "$tmp"
if [ -f scripts/gen-extra.sh ]; then scripts/gen-extra.sh "$tmp"; fi
# gen/descriptor.binpb (the module as a FileDescriptorSet, for server reflection) comes from the
# local plugin scripts/protoc-gen-descriptor-set.mjs listed in buf.gen.yaml.
rm -rf "$out" && mkdir -p "$(dirname "$out")" && mv "$tmp/gen" "$out"
