#!/usr/bin/env node
// Entry point of the `palimpsest` command. V8's concurrent ArrayBuffer sweeping makes every
// typed-array allocation over 64 bytes cost ~2 us on small machines (protobuf encoding is 5x
// slower); NODE_OPTIONS refuses the flag, so it is set here, before anything allocates.
// The old-generation floor of a server (`--initial-old-space-size=128`, README "Running the
// server") is read when V8 starts, before this line runs: pass it on node's command line, as
// `npm start` does.
import v8 from 'node:v8';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');
const built = new URL('../dist/src/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(built))) {
  process.stderr.write('palimpsest: not built; run `npm install` (or `npm run build`) in the project first\n');
  process.exit(2);
}
const { main } = await import(built.href);
// A command whose call never settles and whose event loop empties (a connection that closed
// without an answer) would otherwise end with Node's silent status 13 for an unsettled top-level
// await: say so, and exit 3 (the server could not be reached).
let settled = false;
process.on('exit', () => {
  if (settled || process.exitCode !== undefined) return;
  process.stderr.write('error: UNAVAILABLE: the call ended without an answer from the server (the connection closed or stalled); retry, and check the server log\n');
  process.exitCode = 3;
});
process.exitCode = await main(process.argv.slice(2));
settled = true;
