/**
 * The peer's server process for bench/peer.bench.ts (not run by hand): Electric's Durable Streams
 * Node.js reference server, `@durable-streams/server` (a dev dependency, exact version in
 * package.json), on 127.0.0.1:0.
 *
 *   node bench/server/peer-child.mjs memory
 *   node bench/server/peer-child.mjs file <dataDir>
 *
 * `memory` is its in-memory store (the default when no dataDir is given), `file` its file store
 * (segment files written and fdatasync'ed before the append is acknowledged, LMDB metadata).
 * Compression is off (the bench's bodies are ~300 B; gzip would cost the peer CPU that the gRPC
 * side does not pay). Prints one JSON line {"port":N} when listening; exits on SIGTERM or when
 * stdin closes (the parent died). Concurrent ArrayBuffer sweeping is turned off as for every
 * Palimpsest process of the benches.
 */
import v8 from 'node:v8';
v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');

const { DurableStreamTestServer } = await import('@durable-streams/server');
const [mode, dataDir] = process.argv.slice(2);
// The file store logs recovery lines on stdout/stderr: keep stdout for the port line only.
console.log = () => undefined;
console.info = () => undefined;
const server = new DurableStreamTestServer({ port: 0, host: '127.0.0.1', compression: false, ...(mode === 'file' ? { dataDir } : {}) });
await server.start();
process.stdout.write(`${JSON.stringify({ port: Number(new URL(server.url).port) })}\n`);

let stopping = false;
const exit = () => {
  if (stopping) return;
  stopping = true;
  void server.stop().finally(() => process.exit(0));
};
process.on('SIGTERM', exit);
process.stdin.on('end', exit);
process.stdin.resume();
