/**
 * A server process for the server benchmarks (spawned by bench/server.bench.ts; not run by hand).
 *
 *   node --import tsx bench/server/child.ts palimpsest <db> <full|normal> [--sweeping] [--sqlite-writer=inline]
 *   node --import tsx bench/server/child.ts echo [--sweeping]
 *   node --import tsx bench/server/child.ts hold
 *   node --import tsx bench/server/child.ts h2echo [--sweeping]
 *   node --import tsx bench/server/child.ts h2hold
 *   node --import tsx bench/server/child.ts replay <ListEvents response file> <GetMessages response file>
 *
 * `palimpsest` runs the real server (startServer) on 127.0.0.1:0, on grpc-js; `echo` runs a bare grpc-js
 * server whose AppendEvents/ListEvents/GetMessages handlers echo the request bytes back (identity
 * serializers, no protobuf, no store): the machine's gRPC ceiling for a same-size message.
 * `replay` answers every ListEvents and GetMessages with the bytes of a file (the real server's
 * response, saved by the bench): the ceiling of grpc-js carrying exactly those responses, with no
 * store, app or encoding work behind them.
 * `h2echo` and `h2hold` are the same on bare node:http2 (gRPC framing written by hand, nothing
 * else): the ceiling of node:http2 itself.
 * Without --sweeping, V8's concurrent ArrayBuffer sweeping is turned off first thing, as
 * bin/palimpsest.mjs does. Prints one JSON line {"port":N} when listening; exits on SIGTERM or
 * when stdin closes (the parent died).
 */
import v8 from 'node:v8';
import type { ServerWritableStream } from '@grpc/grpc-js';

const sweeping = process.argv.includes('--sweeping');
if (!sweeping) v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const mode = args[0];
const sqliteWriter = process.argv.includes('--sqlite-writer=inline') ? 'inline' : 'thread';
let stop: () => Promise<void>;

if (mode === 'palimpsest') {
  const { startServer } = await import('../../src/main.js');
  const server = await startServer({ listen: '127.0.0.1:0', db: args[1], durability: args[2] === 'normal' ? 'normal' : 'full', logLevel: 'silent', sqliteWriter });
  stop = () => server.shutdown();
  // The store behind the monitoring and tracing proxies: a SQLite file store says whether its
  // reads verify rows in SQLite (a missing or stale extension would make the reads measure JS).
  const ext = (server.app.store as { checksumExtension?: { loaded: boolean; problem?: string } }).checksumExtension;
  if (ext !== undefined && !ext.loaded) process.stderr.write(`bench server: ${ext.problem ?? 'the SQLite checksum extension is off'}\n`);
  // SIGUSR2: print the store's write counters (group-commit sizes) as one JSON line.
  // The store under the blob layer (BlobbingStore.inner), whose counters these are.
  let store = server.app.store as { stats?: () => object; inner?: unknown };
  while (store.stats === undefined && store.inner !== undefined) store = store.inner as typeof store;
  // With --expose-gc, after a full GC: the memory figures the subscriber bench reads.
  process.on('SIGUSR2', () => {
    (globalThis as { gc?: () => void }).gc?.();
    process.stdout.write(`${JSON.stringify({ stats: store.stats?.() ?? null, memory: process.memoryUsage() })}\n`);
  });
  process.stdout.write(`${JSON.stringify({ port: server.port })}\n`);
} else if (mode === 'echo') {
  const grpc = await import('@grpc/grpc-js');
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024, 'grpc.max_send_message_length': 16 * 1024 * 1024 });
  const identity = (b: Buffer): Buffer => b;
  const echo = (call: { request: Buffer }, cb: (err: null, res: Buffer) => void): void => cb(null, call.request);
  const def = (name: string) => ({ path: `/palimpsest.v1.SessionService/${name}`, requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity });
  server.addService({ appendEvents: def('AppendEvents'), listEvents: def('ListEvents'), getMessages: def('GetMessages') } as never, { appendEvents: echo, listEvents: echo, getMessages: echo } as never);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  stop = () => new Promise((r) => server.tryShutdown(() => r()));
  process.stdout.write(`${JSON.stringify({ port })}\n`);
} else if (mode === 'replay') {
  const grpc = await import('@grpc/grpc-js');
  const { readFileSync } = await import('node:fs');
  const listBytes = readFileSync(args[1]!);
  const messagesBytes = readFileSync(args[2]!);
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024, 'grpc.max_send_message_length': 16 * 1024 * 1024 });
  const identity = (b: Buffer): Buffer => b;
  const def = (name: string) => ({ path: `/palimpsest.v1.SessionService/${name}`, requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity });
  const answer = (bytes: Buffer) => (_call: unknown, cb: (err: null, res: Buffer) => void): void => cb(null, bytes);
  server.addService({ listEvents: def('ListEvents'), getMessages: def('GetMessages') } as never, { listEvents: answer(listBytes), getMessages: answer(messagesBytes) } as never);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  stop = () => new Promise((r) => server.tryShutdown(() => r()));
  process.stdout.write(`${JSON.stringify({ port })}\n`);
} else if (mode === 'hold') {
  // The floor of an idle server stream in grpc-js: SubscribeSurface answers one `caughtUp`
  // message and then holds the call open, doing nothing else (bench/subscribers.bench.ts); and
  // the floor of a fan-out to them (AppendEvents below).
  const grpc = await import('@grpc/grpc-js');
  const { AppendEventsRequest, AppendEventsResponse, SubscribeSurfaceResponse } = await import('../../gen/palimpsest/v1/service.js');
  const server = new grpc.Server();
  const identity = (b: Buffer): Buffer => b;
  const caughtUp = Buffer.from(SubscribeSurfaceResponse.encode({ cursor: undefined, kind: { $case: 'caughtUp', value: {} } } as never).finish());
  const held = new Set<ServerWritableStream<Buffer, Buffer>>();
  let next = 0;
  // The fan-out floor (subscribers bench): AppendEvents decodes the request, encodes its first event
  // as one append delta ONCE and writes that Buffer to every held stream, then answers. No store.
  const appendEvents = (call: { request: Buffer }, cb: (e: null, r: Buffer) => void): void => {
    const req = AppendEventsRequest.decode(call.request);
    const seq = next++;
    const e = req.events[0]!;
    const delta = Buffer.from(SubscribeSurfaceResponse.encode({
      cursor: seq, kind: { $case: 'append', value: { seq } }, message: undefined,
      event: { seq, time: Date.now(), type: e.type, data: e.data, surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs, ignorable: e.ignorable },
    } as never).finish());
    for (const c of held) c.write(delta);
    cb(null, Buffer.from(AppendEventsResponse.encode({ seqs: [seq], replayed: false, surfaceLength: seq + 1 }).finish()));
  };
  const def = (name: string, responseStream: boolean) => ({ path: `/palimpsest.v1.SessionService/${name}`, requestStream: false, responseStream, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity });
  server.addService({ subscribeSurface: def('SubscribeSurface', true), getSession: def('GetSession', false), createSession: def('CreateSession', false), appendEvents: def('AppendEvents', false) } as never, {
    appendEvents,
    subscribeSurface: (call: ServerWritableStream<Buffer, Buffer>) => {
      held.add(call);
      call.on('cancelled', () => held.delete(call));
      call.write(caughtUp);
    },
    getSession: (_c: unknown, cb: (e: null, r: Buffer) => void) => cb(null, Buffer.alloc(0)),
    createSession: (_c: unknown, cb: (e: null, r: Buffer) => void) => cb(null, Buffer.alloc(0)),
  } as never);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  process.on('SIGUSR2', () => {
    (globalThis as { gc?: () => void }).gc?.();
    process.stdout.write(`${JSON.stringify({ stats: null, memory: process.memoryUsage() })}\n`);
  });
  stop = () => new Promise((r) => server.tryShutdown(() => r()));
  process.stdout.write(`${JSON.stringify({ port })}\n`);
} else if (mode === 'h2echo' || mode === 'h2hold') {
  // Bare node:http2: the request's frames are echoed back (h2echo), or SubscribeSurface answers
  // one `caughtUp` message and holds the stream (h2hold); unary calls answer an empty message.
  const http2 = await import('node:http2');
  const { SubscribeSurfaceResponse } = await import('../../gen/palimpsest/v1/service.js');
  const frame = (b: Uint8Array): Buffer => {
    const f = Buffer.allocUnsafe(b.length + 5);
    f[0] = 0;
    f.writeUInt32BE(b.length, 1);
    f.set(b, 5);
    return f;
  };
  const caughtUp = frame(SubscribeSurfaceResponse.encode({ cursor: undefined, kind: { $case: 'caughtUp', value: {} } } as never).finish());
  const empty = frame(new Uint8Array(0));
  const headers = { ':status': 200, 'content-type': 'application/grpc' };
  const trailers = { 'grpc-status': '0', 'grpc-message': 'OK' };
  const held = new Set<unknown>();
  const onStream = (stream: import('node:http2').ServerHttp2Stream, h: import('node:http2').IncomingHttpHeaders): void => {
    stream.on('error', () => undefined);
    const hold = mode === 'h2hold' && h[':path'] === '/palimpsest.v1.SessionService/SubscribeSurface';
    const parts: Buffer[] = [];
    stream.on('data', (d: Buffer) => { if (!hold) parts.push(d); });
    stream.on('end', () => {
      stream.respond(headers, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers(trailers));
      if (hold) {
        held.add(stream);
        stream.on('close', () => held.delete(stream));
        stream.write(caughtUp);
        return;
      }
      stream.end(mode === 'h2hold' ? empty : Buffer.concat(parts));
    });
  };
  const server = http2.createServer({ settings: { maxConcurrentStreams: 1016 } });
  server.on('stream', onStream);
  const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
  process.on('SIGUSR2', () => {
    (globalThis as { gc?: () => void }).gc?.();
    process.stdout.write(`${JSON.stringify({ stats: null, memory: process.memoryUsage() })}\n`);
  });
  stop = () => new Promise((r) => server.close(() => r()));
  process.stdout.write(`${JSON.stringify({ port })}\n`);
} else {
  throw new Error(`unknown mode ${String(mode)}`);
}

let stopping = false;
const exit = (): void => {
  if (stopping) return;
  stopping = true;
  void stop().finally(() => process.exit(0));
};
process.on('SIGTERM', exit);
process.stdin.on('end', exit);
process.stdin.resume();
