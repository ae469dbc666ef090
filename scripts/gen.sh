#!/usr/bin/env bash
# Regenerates gen/ from proto/ with local plugins only (no remote Buf registry).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf gen.tmp && mkdir gen.tmp
npx buf generate -o gen.tmp
if [ -f scripts/gen-extra.sh ]; then scripts/gen-extra.sh gen.tmp; fi
# The whole module (imports included) as a FileDescriptorSet, served by server reflection.
npx buf build --as-file-descriptor-set --exclude-source-info -o gen.tmp/gen/descriptor.binpb
rm -rf gen && mv gen.tmp/gen gen && rm -rf gen.tmp
