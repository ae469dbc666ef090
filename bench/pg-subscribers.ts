/**
 * The PostgreSQL benches' fan-out subscribers (bench/postgres.bench.ts, bench/pg-profile.ts):
 * `count` SubscribeEvents streams on one session, each recording when every event arrived.
 */
import type { ClientReadableStream } from '@grpc/grpc-js';
import { type SessionServiceClient, SubscribeEventsRequest, type SubscribeEventsResponse } from '../gen/palimpsest/v1/service.js';

/** Opens the streams and waits until every one is caught up; `arrivals[i]` maps seq -> arrival time (performance.now()). */
export async function openSubscribers(client: SessionServiceClient, sessionId: string, count: number): Promise<{ streams: ClientReadableStream<SubscribeEventsResponse>[]; arrivals: Map<number, number>[] }> {
  const arrivals: Map<number, number>[] = [];
  const opened = Array.from({ length: count }, (_, i) => {
    const got = new Map<number, number>();
    arrivals[i] = got;
    const stream = client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId }));
    let caught = false;
    const ready = new Promise<void>((resolve) => {
      stream.on('data', (m: SubscribeEventsResponse) => {
        if (m.kind?.$case === 'caughtUp' && !caught) {
          caught = true;
          resolve();
        }
        if (m.kind?.$case === 'event') got.set(m.kind.value.seq, performance.now());
      });
    });
    stream.on('error', () => undefined);
    return { stream, ready };
  });
  await Promise.all(opened.map((s) => s.ready));
  return { streams: opened.map((s) => s.stream), arrivals };
}
