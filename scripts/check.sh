#!/usr/bin/env bash
# `npm run check`: buf lint + format, gen/ drift, typecheck, lint, import cycles, builds, the whole test suite.
# Runs every step, then ends with one plain summary line: "N passed, M failed"
# (M counts failed tests plus failed check steps).
set -uo pipefail
cd "$(dirname "$0")/.."
failed_steps=()
step() {
  local name="$1"; shift
  echo "== $name"
  if ! "$@"; then failed_steps+=("$name"); echo "!! $name failed"; fi
}
drift() {
  local tmp; tmp=$(mktemp -d)
  scripts/gen.sh "$tmp/gen" >/dev/null || { rm -rf "$tmp"; return 1; }
  if ! diff -r gen "$tmp/gen"; then
    echo "gen/ is stale: run scripts/gen.sh and commit the result"; rm -rf "$tmp"; return 1
  fi
  rm -rf "$tmp"
}
breaking() {
  # Against the previous commit on main, when there is one that has the module.
  if git rev-parse -q --verify HEAD~1 >/dev/null 2>&1 && git cat-file -e HEAD~1:buf.yaml 2>/dev/null; then
    npx buf breaking --against '.git#ref=HEAD~1'
  else
    echo "no previous commit with buf.yaml; skipping buf breaking"
  fi
}
step "buf lint" npx buf lint
step "buf format" npx buf format -d --exit-code
step "buf breaking" breaking
step "gen drift" drift
step "typecheck" npx tsc -p tsconfig.json --noEmit
step "typecheck (viewer)" npx tsc -p web/tsconfig.json --noEmit
step "eslint" npx eslint .
step "import cycles" node scripts/check-cycles.mjs src
step "build" npm run -s build
step "build (viewer)" npx vite build --config web/vite.config.ts --logLevel warn
report=$(mktemp)
echo "== tests"
npx vitest run --reporter=default --reporter=json --outputFile="$report"
test_status=$?
read -r passed failed < <(node -e '
  const fs = require("fs");
  try { const r = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
        console.log(r.numPassedTests, r.numFailedTests + (r.numRuntimeErrorTestSuites||0) + (r.testResults||[]).filter(t=>t.status==="failed"&&(!t.assertionResults||t.assertionResults.length===0)).length);
  } catch { console.log(0, 1); }' "$report")
rm -f "$report"
if [ "$test_status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
if [ ${#failed_steps[@]} -gt 0 ]; then echo "failed check steps: ${failed_steps[*]}"; fi
failed=$((failed + ${#failed_steps[@]}))
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
