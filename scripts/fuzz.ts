/**
 * Long fuzz run (issue 9): `npx tsx scripts/fuzz.ts [--seconds 600]`. Same properties as
 * test/e2e/fuzz.test.ts, for as long as asked, against a fresh server; exits 1 on the first
 * failure with its seed and counterexample, 0 otherwise.
 */
import fc from 'fast-check';
import { status, type ServiceError } from '@grpc/grpc-js';
import { call, startTestServer } from '../test/support/test-server.js';
import { input, userMessage } from '../test/support/events.js';
import { ACCEPTABLE_CODES, dbChecksum, exportAll, hostileAppend, hostileBytes, sendRaw } from '../test/support/fuzz-harness.js';
import { decodeError } from '../src/client/error-details.js';

const i = process.argv.indexOf('--seconds');
const seconds = i >= 0 ? Number(process.argv[i + 1]) : 600;
const METHODS = ['CreateSession', 'GetSession', 'ListSessions', 'DeleteSession', 'AppendEvents', 'ListEvents', 'GetSurface', 'GetMessages', 'ForkSession', 'RepairSession'];

const t = await startTestServer({ maxMessageBytes: 4 * 1024 * 1024 });
const c = t.client;
const ids = ['fz-a', 'fz-b'];
for (const id of ids) await call(c.createSession.bind(c), { sessionId: id, labels: {}, strict: false });
await call(c.appendEvents.bind(c), { sessionId: 'fz-a', idempotencyKey: '', events: [input('turn/start', { turn: 1 }), userMessage('u1', 'hi')] });
const before = { sum: dbChecksum(t.dbPath), export: await exportAll(c, ids) };
let runs = 0;
try {
  await fc.assert(fc.asyncProperty(hostileAppend(ids), async (req) => {
    runs++;
    try {
      await call(c.appendEvents.bind(c), req);
    } catch (e) {
      const d = decodeError(e as ServiceError);
      if (!ACCEPTABLE_CODES.has(d.code)) throw new Error(`unexpected code ${d.code}: ${d.message.slice(0, 200)}`);
      return;
    }
    throw new Error('a poisoned batch was accepted');
  }), { numRuns: Number.MAX_SAFE_INTEGER, interruptAfterTimeLimit: (seconds * 1000) / 2 });
  await fc.assert(fc.asyncProperty(fc.constantFrom(...METHODS), hostileBytes, async (method, bytes) => {
    runs++;
    const code = await sendRaw(t.server.address, `/palimpsest.v1.SessionService/${method}`, bytes);
    if (code === status.INTERNAL || code === status.UNKNOWN) throw new Error(`${method} answered ${code} to ${bytes.toString('hex').slice(0, 120)}`);
  }), { numRuns: Number.MAX_SAFE_INTEGER, interruptAfterTimeLimit: (seconds * 1000) / 2 });
  // Random bytes may decode to a valid CreateSession of a new id; the sessions we own must not change.
  if ((await exportAll(c, ids)) !== before.export) throw new Error('stored sessions changed');
  console.log(`fuzz: ${runs} hostile requests, server up, stored sessions unchanged`);
} catch (e) {
  console.error(String(e).slice(0, 2000));
  process.exitCode = 1;
} finally {
  await t.stop();
}
