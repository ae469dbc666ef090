#!/usr/bin/env node
// Entry point of the `palimpsest` command. V8's concurrent ArrayBuffer sweeping makes every
// typed-array allocation over 64 bytes cost ~2 us on small machines (protobuf encoding is 5x
// slower); NODE_OPTIONS refuses the flag, so it is set here, before anything allocates.
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
process.exitCode = await main(process.argv.slice(2));
