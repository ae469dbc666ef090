/**
 * A load generator for AppendStream (bench/server.bench.ts, bench/peer.bench.ts): one grpc-js
 * client, one bidirectional stream, `inflight` batches outstanding on it (the next batch is written
 * as each answer arrives), for WARMUP + DURATION seconds. Requests are encoded once (identity
 * serializers: the client does no protobuf work per batch); every answer is checked (a refused
 * batch fails the run). The stream answers one session's batches in order, so latency is measured
 * first-in first-out.
 */
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

/** Runs the load once on a new client (closed after). `request` from streamRequest; `events` per batch. */
export async function streamLoad(address: string, request: Buffer, events: number, inflight: number, warmupS: number, durationS: number): Promise<StreamRun> {
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
