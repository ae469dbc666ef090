/**
 * Subscription fan-out benchmark: 100 SubscribeSurface streams on one session against a bare
 * grpc-js server-streaming fan-out of the same message bytes to 100 streams, in one run.
 *
 *   npx tsx bench/fanout.bench.ts [--quick]
 *
 * 1. Latency at 100 appends/s (10,000 deliveries/s): per delivery, from the moment the committed
 *    batch is published by the app (bare: from the moment the server writes) to its arrival at the
 *    client, plus (Palimpsest only) from the AppendEvents acknowledgement to arrival (clamped at 0:
 *    deltas may arrive before the ack).
 *    Also process CPU time (user + system, all threads) per delivery over the same interval, which
 *    a loaded host disturbs far less than wall-clock latency (Palimpsest's includes the appends).
 * 2. Ceiling: deliveries/s sustained when appending as fast as possible (8 concurrent appenders of
 *    one event each; bare: the server writes as fast as backpressure allows).
 * Every figure is the median of RUNS runs with the min-max range. Clients and servers share the
 * process, so both sides' clients do the same work: they decode every message as a
 * SubscribeSurfaceResponse (the bare server writes one encoded append delta per message, encoded
 * once and written to every stream, as Palimpsest does).
 */
import v8 from 'node:v8';
v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');

import { cpus } from 'node:os';
import { Client, Server, ServerCredentials, credentials, type ServerWritableStream } from '@grpc/grpc-js';
import { startServer, type RunningServer } from '../src/main.js';
import { SessionServiceClient, SubscribeSurfaceRequest, SubscribeSurfaceResponse } from '../gen/palimpsest/v1/service.js';
import type { EventInput } from '../gen/palimpsest/v1/event.js';

const quick = process.argv.includes('--quick');
const RUNS = 5;
const SUBSCRIBERS = 100;
const CHANNELS = 10;
const RATE = 100;
const LATENCY_SECONDS = quick ? 2 : 5;
const CEILING_SECONDS = quick ? 1.5 : 3;

const now = (): number => performance.now();

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] as number;
}

function userMessage(i: number): EventInput {
  const data = { id: `m${i}`, role: 'user', content: [{ type: 'text', text: `message ${i} `.padEnd(160, '.') }], source: { kind: 'user' } };
  return { type: 'user/message', data: { kind: { $case: 'json', value: JSON.stringify(data) } }, surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: undefined, ignorable: false };
}

function appendOnce(c: SessionServiceClient, id: string, i: number): Promise<number> {
  return new Promise((resolve, reject) => c.appendEvents({ sessionId: id, events: [userMessage(i)], idempotencyKey: '' }, (e, r) => (e ? reject(e) : resolve(r.seqs[0] as number))));
}

interface LatencyResult { p50: number; p99: number; ackP50?: number; ackP99?: number; cpuPerDelivery: number }

// ---- Palimpsest ------------------------------------------------------------------------------

async function palimpsestRun(mode: 'latency' | 'ceiling', run: number): Promise<LatencyResult & { deliveriesPerSec: number }> {
  const srv: RunningServer = await startServer({ listen: '127.0.0.1:0', db: ':memory:', logLevel: 'silent', heartbeatMs: 60_000 });
  const writer = new SessionServiceClient(srv.address, credentials.createInsecure());
  const id = `fan-${mode}-${run}`;
  await new Promise<void>((res, rej) => writer.createSession({ sessionId: id, labels: {}, strict: false }, (e) => (e ? rej(e) : res())));
  const published = new Map<number, number>();
  const acked = new Map<number, number>();
  srv.app.feed.subscribe(id, { onCommit: (b) => { const t = now(); for (const e of b.events) published.set(e.seq, t); }, onDeleted: () => undefined });
  const clients = Array.from({ length: CHANNELS }, () => new SessionServiceClient(srv.address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
  const lat: number[] = [];
  const ackLat: number[] = [];
  let delivered = 0;
  let lastDelivery = 0;
  let caughtUp = 0;
  const streams = [];
  for (let s = 0; s < SUBSCRIBERS; s++) {
    const st = (clients[s % CHANNELS] as SessionServiceClient).subscribeSurface(SubscribeSurfaceRequest.fromPartial({ sessionId: id }));
    st.on('data', (m: SubscribeSurfaceResponse) => {
      const t = now();
      if (m.kind?.$case === 'caughtUp') caughtUp++;
      if (m.kind?.$case !== 'append') return;
      delivered++;
      lastDelivery = t;
      if (mode === 'latency') {
        lat.push(t - (published.get(m.kind.value.seq) as number));
        const a = acked.get(m.kind.value.seq);
        if (a !== undefined) ackLat.push(Math.max(0, t - a));
      }
    });
    st.on('error', () => undefined);
    streams.push(st);
  }
  while (caughtUp < SUBSCRIBERS) await new Promise((r) => setTimeout(r, 5));
  const start = now();
  const cpu0 = process.cpuUsage();
  let sent = 0;
  if (mode === 'latency') {
    const total = RATE * LATENCY_SECONDS;
    await new Promise<void>((resolve) => {
      const tick = (): void => {
        const due = Math.min(total, Math.floor(((now() - start) / 1000) * RATE) + 1);
        while (sent < due) {
          const i = sent++;
          void appendOnce(writer, id, i).then((seq) => acked.set(seq, now()));
        }
        if (sent >= total) resolve();
        else setTimeout(tick, 2);
      };
      tick();
    });
  } else {
    const deadline = start + CEILING_SECONDS * 1000;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (now() < deadline) await appendOnce(writer, id, sent++);
    }));
  }
  const expected = sent * SUBSCRIBERS;
  const waitUntil = now() + 30_000;
  while (delivered < expected && now() < waitUntil) await new Promise((r) => setTimeout(r, 5));
  const elapsed = (lastDelivery - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const cpuPerDelivery = (cpu.user + cpu.system) / delivered;
  for (const st of streams) st.cancel();
  for (const c of clients) c.close();
  writer.close();
  await srv.shutdown();
  lat.sort((a, b) => a - b);
  ackLat.sort((a, b) => a - b);
  return { p50: percentile(lat, 0.5), p99: percentile(lat, 0.99), ackP50: percentile(ackLat, 0.5), ackP99: percentile(ackLat, 0.99), deliveriesPerSec: delivered / elapsed, cpuPerDelivery };
}

// ---- bare grpc-js fan-out --------------------------------------------------------------------

const BARE_PATH = '/bench.Bare/Subscribe';

async function bareRun(mode: 'latency' | 'ceiling', sample: SubscribeSurfaceResponse): Promise<LatencyResult & { deliveriesPerSec: number }> {
  const server = new Server();
  const calls = new Set<ServerWritableStream<Buffer, Buffer>>();
  let opened = 0;
  server.addService({
    subscribe: {
      path: BARE_PATH, requestStream: false, responseStream: true,
      requestSerialize: (v: Buffer) => v, requestDeserialize: (v: Buffer) => v,
      responseSerialize: (v: Buffer) => v, responseDeserialize: (v: Buffer) => v,
    },
  }, {
    subscribe: (call: ServerWritableStream<Buffer, Buffer>) => {
      calls.add(call);
      opened++;
      call.on('cancelled', () => calls.delete(call));
    },
  });
  const port = await new Promise<number>((res, rej) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
  const clients = Array.from({ length: CHANNELS }, () => new Client(`127.0.0.1:${port}`, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
  const written: number[] = [];
  const lat: number[] = [];
  let delivered = 0;
  let lastDelivery = 0;
  const streams = [];
  for (let s = 0; s < SUBSCRIBERS; s++) {
    const st = (clients[s % CHANNELS] as Client).makeServerStreamRequest(BARE_PATH, (v: Buffer) => v, (v: Buffer) => SubscribeSurfaceResponse.decode(v), Buffer.alloc(0));
    st.on('data', (m: SubscribeSurfaceResponse) => {
      const t = now();
      if (m.kind?.$case !== 'append') return;
      delivered++;
      lastDelivery = t;
      if (mode === 'latency') lat.push(t - (written[m.kind.value.seq] as number));
    });
    st.on('error', () => undefined);
    streams.push(st);
  }
  while (opened < SUBSCRIBERS) await new Promise((r) => setTimeout(r, 5));
  // One encoded append delta per message (cursor and seq = its index), the same Buffer to every stream.
  const frame = (i: number): Buffer => Buffer.from(SubscribeSurfaceResponse.encode({
    ...sample, cursor: i, kind: { $case: 'append', value: { seq: i } }, event: sample.event && { ...sample.event, seq: i },
  }).finish());
  const start = now();
  const cpu0 = process.cpuUsage();
  let sent = 0;
  if (mode === 'latency') {
    const total = RATE * LATENCY_SECONDS;
    await new Promise<void>((resolve) => {
      const tick = (): void => {
        const due = Math.min(total, Math.floor(((now() - start) / 1000) * RATE) + 1);
        while (sent < due) {
          const b = frame(sent);
          written[sent++] = now();
          for (const c of calls) c.write(b);
        }
        if (sent >= total) resolve();
        else setTimeout(tick, 2);
      };
      tick();
    });
  } else {
    const deadline = start + CEILING_SECONDS * 1000;
    while (now() < deadline) {
      const b = frame(sent++);
      let blocked: ServerWritableStream<Buffer, Buffer> | undefined;
      for (const c of calls) if (!c.write(b)) blocked = c;
      if (blocked) await new Promise((r) => blocked.once('drain', r));
      else if (sent % 8 === 0) await new Promise((r) => setImmediate(r));
    }
  }
  const expected = sent * SUBSCRIBERS;
  const waitUntil = now() + 30_000;
  while (delivered < expected && now() < waitUntil) await new Promise((r) => setTimeout(r, 5));
  const elapsed = (lastDelivery - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const cpuPerDelivery = (cpu.user + cpu.system) / delivered;
  for (const st of streams) st.cancel();
  for (const c of clients) c.close();
  server.forceShutdown();
  lat.sort((a, b) => a - b);
  return { p50: percentile(lat, 0.5), p99: percentile(lat, 0.99), deliveriesPerSec: delivered / elapsed, cpuPerDelivery };
}

// ---- report ------------------------------------------------------------------------------------

function med(xs: number[]): string {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  const m = s[Math.floor(s.length / 2)] as number;
  const f = (v: number): string => (v >= 100 ? v.toFixed(0) : v.toFixed(2));
  return `${f(m)} (${f(s[0] as number)}-${f(s[s.length - 1] as number)})`;
}
const median = (xs: number[]): number => {
  const s = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

async function main(): Promise<void> {
  // A representative encoded append delta (event + cursor) as the bare payload.
  const sample: SubscribeSurfaceResponse = {
    cursor: 12345, kind: { $case: 'append', value: { seq: 12345 } }, message: undefined,
    event: { seq: 12345, time: Date.now(), type: 'user/message', data: userMessage(1).data, surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: undefined, ignorable: false },
  } as SubscribeSurfaceResponse;
  const payload = SubscribeSurfaceResponse.encode(sample).finish();
  const P: Record<string, number[]> = { p50: [], p99: [], ack50: [], ack99: [], b50: [], b99: [], ceil: [], bceil: [], cpu: [], bcpu: [] };
  for (let r = 0; r < RUNS; r++) {
    const p = await palimpsestRun('latency', r);
    const b = await bareRun('latency', sample);
    const pc = await palimpsestRun('ceiling', r);
    const bc = await bareRun('ceiling', sample);
    P.p50!.push(p.p50); P.p99!.push(p.p99); P.ack50!.push(p.ackP50 ?? NaN); P.ack99!.push(p.ackP99 ?? NaN);
    P.b50!.push(b.p50); P.b99!.push(b.p99); P.ceil!.push(pc.deliveriesPerSec); P.bceil!.push(bc.deliveriesPerSec);
    P.cpu!.push(p.cpuPerDelivery); P.bcpu!.push(b.cpuPerDelivery);
    process.stderr.write(`run ${r + 1}/${RUNS}: p99 ${p.p99.toFixed(2)} ms vs bare ${b.p99.toFixed(2)} ms; ceiling ${pc.deliveriesPerSec.toFixed(0)}/s vs bare ${bc.deliveriesPerSec.toFixed(0)}/s\n`);
  }
  console.log(`\nFan-out: ${SUBSCRIBERS} subscribers on one session over ${CHANNELS} channels, ${RATE} appends/s for ${LATENCY_SECONDS}s; payload ${payload.length} B; ${RUNS} runs, median (min-max); node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'})${quick ? ', --quick' : ''}\n`);
  console.log('| measure | Palimpsest SubscribeSurface | bare grpc-js fan-out | ratio (median) |');
  console.log('|---|---|---|---|');
  console.log(`| p50 publish/write -> delivery (ms) | ${med(P.p50!)} | ${med(P.b50!)} | ${(median(P.p50!) / median(P.b50!)).toFixed(2)}x |`);
  console.log(`| p99 publish/write -> delivery (ms) | ${med(P.p99!)} | ${med(P.b99!)} | ${(median(P.p99!) / median(P.b99!)).toFixed(2)}x |`);
  console.log(`| p50 append ack -> delivery (ms) | ${med(P.ack50!)} | - | - |`);
  console.log(`| p99 append ack -> delivery (ms) | ${med(P.ack99!)} | - | - |`);
  console.log(`| process CPU per delivery at ${RATE} appends/s (us; Palimpsest incl. the appends) | ${med(P.cpu!)} | ${med(P.bcpu!)} | ${(median(P.cpu!) / median(P.bcpu!)).toFixed(2)}x |`);
  console.log(`| max sustained deliveries/s | ${med(P.ceil!)} | ${med(P.bceil!)} | ${(median(P.ceil!) / median(P.bceil!)).toFixed(2)}x |`);
}

void main().then(() => process.exit(0), (e: unknown) => {
  console.error(e);
  process.exit(1);
});
