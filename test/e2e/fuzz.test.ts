/**
 * Bounded fuzz run (seconds). The long run is `npx tsx scripts/fuzz.ts --seconds 600`.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { status, type ServiceError } from '@grpc/grpc-js';
import { call, startTestServer, type TestServer } from '../support/test-server.js';
import { userMessage, input } from '../support/events.js';
import { ACCEPTABLE_CODES, dbChecksum, exportAll, hostileAppend, hostileBytes, sendRaw } from '../support/fuzz-harness.js';
import { decodeError } from '../../src/client/error-details.js';

/** Failure report without the (possibly megabytes-long) counterexample. */
function shortReport<T>(r: fc.RunDetails<T>): void {
  if (r.failed) throw new Error(`fuzz property failed after ${r.numRuns} runs (seed ${r.seed}, path ${r.counterexamplePath}): ${String(r.errorInstance).slice(0, 500)}\ncounterexample: ${JSON.stringify(r.counterexample).slice(0, 500)}`);
}

const FIXTURE = new URL('../fixtures/reference-sessions/compaction-recovery.jsonl', import.meta.url).pathname;
const METHODS = ['CreateSession', 'GetSession', 'ListSessions', 'DeleteSession', 'AppendEvents', 'ListEvents', 'GetSurface', 'GetMessages', 'ForkSession', 'RepairSession'];

let t: TestServer;
const ids = ['fz-a', 'fz-b'];
beforeAll(async () => {
  t = await startTestServer({ maxMessageBytes: 4 * 1024 * 1024 });
  const c = t.client;
  for (const id of ids) await call(c.createSession.bind(c), { sessionId: id, labels: {}, strict: false });
  await call(c.appendEvents.bind(c), { sessionId: 'fz-a', idempotencyKey: '', events: [input('turn/start', { turn: 1 }), userMessage('u1', 'hi')] });
  // A real reference session with a compaction replace, imported through the client stream.
  await new Promise<void>((resolve, reject) => {
    const s = c.importSession((err) => (err ? reject(err) : resolve()));
    s.write({ part: { $case: 'options', value: { sessionId: 'fz-c', labels: {}, strict: false, allowSeqGaps: false, pairingGuard: false } } });
    s.write({ part: { $case: 'chunk', value: readFileSync(FIXTURE) } });
    s.end();
  });
  ids.push('fz-c');
  // The search index follows the log in the background (its own thread writes the file): a
  // search first catches it up, so the file's bytes can change below only if stored data does.
  await call(c.searchEvents.bind(c), {
    query: 'hi', pageSize: 0, pageToken: '', labelSelector: {}, sessionIds: [], eventTypes: [], startTime: undefined, endTime: undefined,
    toolName: '', surfaceOnly: false, includeShadowed: false, order: 0,
  });
});
afterAll(async () => { await t.stop(); });

describe('fuzz: hostile input never crashes the server or changes stored data', () => {
  it('rejects hostile append batches atomically with proper statuses', async () => {
    const c = t.client;
    const before = { sum: dbChecksum(t.dbPath), export: await exportAll(c, ids) };
    await fc.assert(fc.asyncProperty(hostileAppend(ids), async (req) => {
      try {
        await call(c.appendEvents.bind(c), req);
        throw new Error(`a batch ending with the poison event was accepted: ${JSON.stringify(req).slice(0, 300)}`);
      } catch (e) {
        const err = e as ServiceError;
        if (!('code' in err)) throw e;
        const d = decodeError(err);
        expect(ACCEPTABLE_CODES.has(d.code), `code ${d.code} (${d.message.slice(0, 200)})`).toBe(true);
        // Oversized messages are refused by grpc-js itself (RESOURCE_EXHAUSTED, no details).
        if (d.code !== status.RESOURCE_EXHAUSTED) expect(d.reason, d.message.slice(0, 200)).not.toBe('');
      }
    }), { numRuns: 250, interruptAfterTimeLimit: 15_000, reporter: shortReport });
    expect(dbChecksum(t.dbPath)).toBe(before.sum);
    expect(await exportAll(c, ids)).toBe(before.export);
  });

  it('answers random bytes on the wire with INVALID_ARGUMENT (never INTERNAL) and stays up', async () => {
    const before = { sum: dbChecksum(t.dbPath) };
    await fc.assert(fc.asyncProperty(fc.constantFrom(...METHODS), hostileBytes, async (method, bytes) => {
      const code = await sendRaw(t.server.address, `/palimpsest.v1.SessionService/${method}`, bytes);
      expect(code, `${method} ${bytes.toString('hex').slice(0, 80)}`).not.toBe(status.INTERNAL);
      expect(code).not.toBe(status.UNKNOWN);
    }), { numRuns: 200, interruptAfterTimeLimit: 10_000, reporter: shortReport });
    const c = t.client;
    const s = await call(c.getSurface.bind(c), { sessionId: 'fz-a' });
    expect(s.seqs).toEqual([1]);
    // Create/Delete may legitimately succeed on random bytes that decode to a valid request
    // naming a new id; the sessions this test owns are unchanged.
    expect(await exportAll(c, ['fz-a'])).toContain('"u1"');
    void before;
  });
});
