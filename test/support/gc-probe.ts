/**
 * Run as a child by test/integration/gc-promotion.test.ts:
 *
 *   node --expose-gc --trace-gc --trace-gc-nvp --import tsx gc-probe.ts <memory|sqlite> <requests> [db path]
 *
 * Appends batches of 100 events, 16 in flight, into one session, after a full collection (the
 * trigger of what the test guards against): through the app layer over the memory store or the
 * SQLite store with its writer thread. V8's trace lines go
 * to stdout; the test adds up what the scavenges promoted between the marks.
 */
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import type { CandidateEvent } from '../../src/domain/event.js';

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

const service = new SessionService(
  store === 'sqlite' ? new SqliteSessionStore({ path, appendWriter: 'thread', durability: 'normal' }) : new MemorySessionStore(),
  DEFAULT_LIMITS,
  Date.now,
);
await service.createSession(ANONYMOUS, { id: 'probe' });
const batch = (): CandidateEvent[] => Array.from({ length: 100 }, (_, n) => ({ type: 'bench/tick', data: { n, text } }));
await probe(() => service.append(ANONYMOUS, 'probe', batch()));
await service.close();
