/**
 * Run as a child by test/integration/gc-promotion.test.ts:
 *
 *   node --expose-gc --trace-gc --trace-gc-nvp --import tsx gc-probe.ts <memory|sqlite|grpc> <requests> [db path]
 *
 * Appends batches of 100 events, 16 in flight, into one session, after a full collection (the
 * trigger of what the test guards against): through the app layer over the memory store or the
 * SQLite store with its writer thread, or through the whole server over gRPC. V8's trace lines go
 * to stdout; the test adds up what the scavenges promoted between the marks.
 */
import { connect } from 'node:http2';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import { startServer } from '../../src/main.js';
import { AppendEventsRequest, CreateSessionRequest } from '../../gen/palimpsest/v1/service.js';

const [, , store = 'memory', requests = '1500', path = ''] = process.argv;
const REQUESTS = Number(requests);
const IN_FLIGHT = 16;
const text = 'The quick brown fox jumps over the lazy dog; '.repeat(4);

/** Runs `append` REQUESTS times, IN_FLIGHT at once, between the marks, after a warm-up and a full collection. */
async function probe(append: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 50; i++) await append();
  // The full collection promotes whatever is live (the current tables too).
  (globalThis as { gc?: () => void }).gc!();
  process.stdout.write('PROBE START\n');
  let sent = 0;
  const lane = async (): Promise<void> => {
    while (sent < REQUESTS) {
      sent++;
      await append();
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
  process.stdout.write('PROBE END\n');
}

if (store === 'grpc') {
  // The whole server (memory store) over gRPC, driven by a bare node:http2 client in this process
  // with one pre-encoded request: what the server's calls keep is what is measured.
  const server = await startServer({ listen: '127.0.0.1:0', logLevel: 'silent', db: ':memory:', grpcTransport: 'native' });
  const session = connect(`http://${server.address}`);
  const grpcCall = (method: string, message: Uint8Array): Promise<void> => new Promise((resolve, reject) => {
    const body = Buffer.alloc(5 + message.length);
    body.writeUInt32BE(message.length, 1);
    body.set(message, 5);
    const req = session.request({ ':method': 'POST', ':path': `/palimpsest.v1.SessionService/${method}`, 'content-type': 'application/grpc', te: 'trailers' });
    // The status comes in the trailers, or in the headers of a trailers-only answer.
    let status: string | undefined;
    let details: string | undefined;
    const read = (h: Record<string, unknown>): void => {
      if (h['grpc-status'] === undefined) return;
      status = String(h['grpc-status']);
      details = String(h['grpc-message'] ?? '');
    };
    req.on('response', read);
    req.on('trailers', read);
    req.on('close', () => (status === '0' ? resolve() : reject(new Error(`${method}: grpc-status ${status ?? '(none)'} ${details ?? ''}`))));
    req.on('error', reject);
    req.resume();
    req.end(body);
  });
  await grpcCall('CreateSession', CreateSessionRequest.encode(CreateSessionRequest.fromPartial({ sessionId: 'probe' })).finish());
  const event = { type: 'bench/tick', data: { kind: { $case: 'json' as const, value: JSON.stringify({ n: 1, text }) } } };
  const request = AppendEventsRequest.encode(AppendEventsRequest.fromPartial({ sessionId: 'probe', events: Array.from({ length: 100 }, () => event) })).finish();
  await probe(() => grpcCall('AppendEvents', request));
  session.close();
  await server.shutdown();
} else {
  const service = new SessionService(
    store === 'sqlite' ? new SqliteSessionStore({ path, appendWriter: 'thread', durability: 'normal' }) : new MemorySessionStore(),
    DEFAULT_LIMITS,
    Date.now,
  );
  await service.createSession(ANONYMOUS, { id: 'probe' });
  const batch = (): CandidateEvent[] => Array.from({ length: 100 }, (_, n) => ({ type: 'bench/tick', data: { n, text } }));
  await probe(() => service.append(ANONYMOUS, 'probe', batch()));
  await service.close();
}
