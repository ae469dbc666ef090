/**
 * Load generators for AppendStream (bench/server.bench.ts, bench/peer.bench.ts): one
 * bidirectional stream, `inflight` batches outstanding on it (a new batch is written for each
 * answer), for WARMUP + DURATION seconds. Requests are encoded once; every answer is checked (a
 * refused batch fails the run). The stream answers one session's batches in order, so latency is
 * measured first-in first-out.
 *
 * - `streamLoad` (the benches' figures): gRPC framing on bare node:http2, as h2load drives the
 *   unary calls and the peer: the answers of one read are parsed and answered with one write of
 *   as many requests. Its cost per batch is a small part of the server's, and like h2load it sends
 *   what it has to send at once.
 * - `grpcStreamLoad`: the same on a grpc-js client (identity serializers). grpc-js writes one
 *   message per turn of the client's event loop (its call is a Writable without `_writev`), so a
 *   burst of answers comes back as requests one TCP segment each, and its CPU per batch (~12 us)
 *   is taken from the same cores as the server's. The benches used it before the addendum of
 *   bench/history/issue-37-grpc-js.md; bench/server/profile-stream.ts --grpc-client runs it.
 */
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { AppendStreamRequest, AppendStreamResponse } from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';

export interface StreamRun {
  /** Events per second over the measured window. */
  rate: number;
  p50: number;
  p99: number;
  /** Batches answered in the measured window. */
  completed: number;
}

const identity = (b: Buffer): Buffer => b;

/** One AppendStream request: a batch of `events` copies of `event` for `sessionId`. */
export function streamRequest(sessionId: string, event: EventInput, events: number): Buffer {
  return Buffer.from(AppendStreamRequest.encode({ correlationId: '', append: { sessionId, events: Array.from({ length: events }, () => event), idempotencyKey: '' } } as never).finish());
}

/** Runs the load once on a new HTTP/2 connection (closed after). `request` from streamRequest; `events` per batch. */
export async function streamLoad(address: string, request: Buffer, events: number, inflight: number, warmupS: number, durationS: number): Promise<StreamRun> {
  const frame = Buffer.allocUnsafe(request.length + 5);
  frame[0] = 0;
  frame.writeUInt32BE(request.length, 1);
  request.copy(frame, 5);
  /** `n` request frames in one buffer, by n (answers of one read are few distinct counts). */
  const frames = new Map<number, Buffer>();
  const framesOf = (n: number): Buffer => {
    let b = frames.get(n);
    if (b === undefined) {
      b = Buffer.concat(Array.from({ length: n }, () => frame));
      frames.set(n, b);
    }
    return b;
  };
  const session = http2.connect(`http://${address}`);
  try {
    return await new Promise<StreamRun>((resolve, reject) => {
      session.on('error', reject);
      const stream = session.request({ ':method': 'POST', ':path': '/palimpsest.v1.SessionService/AppendStream', 'content-type': 'application/grpc', te: 'trailers' });
      const sent: number[] = [];
      let head = 0;
      const lat: number[] = [];
      const started = performance.now();
      const warmEnd = started + warmupS * 1000;
      const end = warmEnd + durationS * 1000;
      let completed = 0;
      let failed: Error | undefined;
      let grpcStatus: string | undefined;
      let ending = false;
      let pending: Buffer = Buffer.alloc(0);
      const send = (n: number): void => {
        const now = performance.now();
        for (let i = 0; i < n; i++) sent.push(now);
        stream.write(framesOf(n));
      };
      stream.on('response', (h) => {
        if (h['grpc-status'] !== undefined) grpcStatus = String(h['grpc-status']);
      });
      stream.on('trailers', (t) => {
        grpcStatus = String(t['grpc-status']);
      });
      stream.on('data', (chunk: Buffer) => {
        const now = performance.now();
        let buf = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        let answers = 0;
        while (buf.length >= 5) {
          const len = buf.readUInt32BE(1);
          if (buf.length < 5 + len) break;
          const msg = buf.subarray(5, 5 + len);
          buf = buf.subarray(5 + len);
          const t0 = sent[head++]!;
          answers++;
          // Field 2 (appended) first: an answer without a correlation id starts with its tag.
          if (msg[0] !== 0x12 && failed === undefined) {
            const r = AppendStreamResponse.decode(msg);
            failed = new Error(`AppendStream batch refused: ${JSON.stringify(r.result)}`);
          }
          if (t0 >= warmEnd && now <= end) {
            lat.push(now - t0);
            completed++;
          }
        }
        pending = buf.length === 0 ? Buffer.alloc(0) : Buffer.from(buf);
        if (answers === 0) return;
        if (now < end && failed === undefined) send(answers);
        else if (head === sent.length && !ending) {
          ending = true;
          stream.end();
        }
      });
      stream.on('close', () => {
        if (failed) return reject(failed);
        if (grpcStatus !== '0') return reject(new Error(`AppendStream ended with grpc-status ${grpcStatus ?? '(none)'} after ${head} answers`));
        lat.sort((a, b) => a - b);
        const pc = (p: number): number => lat[Math.min(lat.length - 1, Math.floor((lat.length * p) / 100))] ?? NaN;
        resolve({ rate: (completed * events) / ((Math.min(performance.now(), end) - warmEnd) / 1000), p50: pc(50), p99: pc(99), completed });
      });
      send(inflight);
    });
  } finally {
    session.close();
  }
}

/** The same load on a grpc-js client (closed after): see the module comment. */
export async function grpcStreamLoad(address: string, request: Buffer, events: number, inflight: number, warmupS: number, durationS: number): Promise<StreamRun> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 });
  try {
    return await new Promise<StreamRun>((resolve, reject) => {
      const call = client.makeBidiStreamRequest('/palimpsest.v1.SessionService/AppendStream', identity, identity);
      const sent: number[] = [];
      let head = 0;
      const lat: number[] = [];
      const started = performance.now();
      const warmEnd = started + warmupS * 1000;
      const end = warmEnd + durationS * 1000;
      let completed = 0;
      let failed: Error | undefined;
      const send = (): void => {
        sent.push(performance.now());
        call.write(request);
      };
      call.on('data', (res: Buffer) => {
        const now = performance.now();
        const t0 = sent[head++]!;
        // Field 2 (appended) first: an answer without a correlation id starts with its tag.
        if (res[0] !== 0x12 && failed === undefined) {
          const r = AppendStreamResponse.decode(res);
          failed = new Error(`AppendStream batch refused: ${JSON.stringify(r.result)}`);
        }
        if (t0 >= warmEnd && now <= end) {
          lat.push(now - t0);
          completed++;
        }
        if (now < end && failed === undefined) send();
        else if (head === sent.length) call.end();
      });
      call.on('error', (e) => reject(failed ?? e));
      call.on('end', () => {
        if (failed) return reject(failed);
        lat.sort((a, b) => a - b);
        const pc = (p: number): number => lat[Math.min(lat.length - 1, Math.floor((lat.length * p) / 100))] ?? NaN;
        resolve({ rate: (completed * events) / ((Math.min(performance.now(), end) - warmEnd) / 1000), p50: pc(50), p99: pc(99), completed });
      });
      for (let i = 0; i < inflight; i++) send();
    });
  } finally {
    client.close();
  }
}
