/**
 * An import is planned per store chunk (STORE_READ_BATCH events), but every rule that looks back
 * must see the whole imported prefix, not only the chunk: a prune (tool/result replace) or a
 * compaction thousands of events after its target, with sourceEventSeqs citing it, is accepted and
 * gives exactly what the same events give when appended; a far-back replace the engine refuses is
 * refused with the same reason (and status) as on append, not INTERNAL, and leaves no session.
 * Over the memory, SQLite and (when installed) PostgreSQL stores.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService } from '../../src/app/session-service.js';
import { STORE_READ_BATCH } from '../../src/app/app-types.js';
import type { SessionStore } from '../../src/app/store-port.js';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import { domainErrorToStatus } from '../../src/server/status-map.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { PostgresSessionStore } from '../../src/store/postgres/postgres-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { assistant, toolResultData, user } from '../support/engine-harness.js';
import { COMPACT_AT, N, PRUNE_AT, baseEvents, goodEvents, jsonl } from '../support/long-import.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';

const ctx = ANONYMOUS;
async function* chunked(bytes: Buffer, size = 65_536): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

/** Appends the same events (with their seq and time) in AppendEvents-sized batches. */
async function appendAll(app: SessionService, id: string, events: readonly CandidateEvent[], pairingGuard: boolean, strict = false): Promise<void> {
  await app.createSession(ctx, { id, pairingGuard, strict });
  for (let i = 0; i < events.length; i += 500) {
    await app.append(ctx, id, events.slice(i, i + 500).map((e, k) => ({ ...e, seq: i + k, time: 2000 + i + k })));
  }
}

async function exported(app: SessionService, id: string): Promise<string[]> {
  const out: string[] = [];
  for await (const lines of app.exportJsonl(ctx, id)) out.push(...lines);
  return out.slice(1); // the header names the session
}

async function view(app: SessionService, id: string): Promise<unknown> {
  const surface = await app.getSurface(ctx, id);
  const model = await app.getMessages(ctx, id, 'model');
  const transcript = await app.getMessages(ctx, id, 'transcript');
  return { surface, model: model.messages, transcript: transcript.messages, export: await exported(app, id) };
}

async function rejection(p: Promise<unknown>): Promise<DomainError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(DomainError);
  return err as DomainError;
}

const CHAIN_LEGACY_AT = STORE_READ_BATCH + 100;
const CHAIN_AT = 2 * STORE_READ_BATCH + 100;

/**
 * A chain of prunes, each in a later chunk: a legacy (flat) prune of seq 2, whose message id is
 * the one of the result it replaces, then a canonical prune of that one, which must keep the id
 * found through the whole chain back to seq 2 (dsh-semantics 1.5, rule 2.4).
 */
function chainEvents(id = 'r-c0'): CandidateEvent[] {
  const out = baseEvents();
  out[2] = { type: 'tool/result', data: toolResultData('c0', 'a very long tool output', { isError: false }), surfaceOp: 'append', sourceEventSeqs: [1] };
  out[CHAIN_LEGACY_AT] = { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c0', content: [{ type: 'text', text: '[pruned once]' }], isError: false }, surfaceOp: { op: 'replace', start: 2, end: 2 }, sourceEventSeqs: [2] };
  out[CHAIN_AT] = { type: 'tool/result', data: toolResultData('c0', '[pruned twice]', { id, isError: false }), surfaceOp: { op: 'replace', start: CHAIN_LEGACY_AT, end: CHAIN_LEGACY_AT }, sourceEventSeqs: [CHAIN_LEGACY_AT] };
  return out;
}

/**
 * Strict mode (dsh-semantics 2.6): turn 1 opens at seq 0 and `last` ends the file, thousands of
 * events (chunks) later; its turn/end is accepted only if the trace still knows the open turn.
 */
function strictEvents(last: CandidateEvent): CandidateEvent[] {
  const out = goodEvents().map((e) => (e.type === 'assistant/message' || e.type === 'tool/result' ? user('filler') : e));
  out[0] = { type: 'turn/start', data: { turn: 1 } };
  out[PRUNE_AT] = user('filler');
  out[COMPACT_AT] = user('summary of 3..10', { op: 'replace', start: 3, end: 10 }, { sourceEventSeqs: [3, 4, 5, 6, 7, 8, 9, 10] });
  out[N - 1] = last;
  return out;
}
const TURN_END: CandidateEvent = { type: 'turn/end', data: { turn: 1, reason: { kind: 'completed' } } };

interface StoreCase {
  readonly name: string;
  readonly skip: boolean;
  open(): Promise<SessionStore>;
}

let pgDb: TestDatabase | undefined;
let pgSchemas = 0;
const dir = mkdtempSync(join(tmpdir(), 'pal-import-lookback-'));
let files = 0;

const STORES: StoreCase[] = [
  { name: 'memory', skip: false, open: async () => new MemorySessionStore() },
  { name: 'sqlite', skip: false, open: async () => new SqliteSessionStore({ path: join(dir, `s${files++}.db`) }) },
  { name: 'postgres', skip: !hasPostgres(), open: async () => PostgresSessionStore.open({ url: pgDb!.url, schema: `lb${pgSchemas++}`, poolSize: 4 }) },
];

beforeAll(async () => {
  if (hasPostgres()) pgDb = await createTestDatabase();
});
afterAll(async () => {
  await pgDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

const services: SessionService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) {
    await s.close();
    await s.store.close();
  }
});

async function service(c: StoreCase): Promise<SessionService> {
  const app = new SessionService(await c.open());
  services.push(app);
  return app;
}

describe.each(STORES)('import looks back over the whole file ($name store)', (c) => {
  it.skipIf(c.skip)('the replaces are several store chunks after their targets', () => {
    expect(PRUNE_AT - 2).toBeGreaterThan(2 * STORE_READ_BATCH);
  });

  for (const pairingGuard of [false, true]) {
    it.skipIf(c.skip)(`accepts a prune and a compaction of events chunks back, as append does (pairing guard ${pairingGuard ? 'on' : 'off'})`, async () => {
      const app = await service(c);
      const events = goodEvents();
      const imported = await app.importJsonl(ctx, chunked(jsonl('imp', events)), { id: 'imp', pairingGuard });
      expect(imported).toMatchObject({ eventCount: N, uncommittedTailBytes: 0 });
      await appendAll(app, 'app', events, pairingGuard);
      const got = await view(app, 'imp');
      expect(got).toEqual(await view(app, 'app'));
      const surface = (got as { surface: { seqs: number[] } }).surface.seqs;
      expect(surface.slice(0, 4)).toEqual([0, 1, PRUNE_AT, COMPACT_AT]);
      expect(surface).not.toContain(2);
      expect(surface).not.toContain(10);
    });
  }

  it.skipIf(c.skip)('accepts a chain of prunes across chunks (a legacy one, then a canonical one keeping the chain\'s id), as append does', async () => {
    const app = await service(c);
    const events = chainEvents();
    await app.importJsonl(ctx, chunked(jsonl('imp', events)), { id: 'imp' });
    await appendAll(app, 'app', events, false);
    const got = await view(app, 'imp');
    expect(got).toEqual(await view(app, 'app'));
    expect((got as { surface: { seqs: number[] } }).surface.seqs.slice(0, 3)).toEqual([0, 1, CHAIN_AT]);
  });

  it.skipIf(c.skip)('accepts, in strict mode, a turn/end of a turn opened chunks back, as append does', async () => {
    const app = await service(c);
    const events = strictEvents(TURN_END);
    expect((await app.importJsonl(ctx, chunked(jsonl('imp', events)), { id: 'imp', strict: true })).eventCount).toBe(N);
    await appendAll(app, 'app', events, false, true);
    expect(await view(app, 'imp')).toEqual(await view(app, 'app'));
  });

  const REFUSED: { what: string; reason: string; code: number; at: number; events(): CandidateEvent[]; pairingGuard?: boolean; strict?: boolean }[] = [
    {
      what: 'a prune that changes more than the content of a result chunks back',
      reason: 'TOOL_RESULT_REPLACE_NON_CONTENT',
      code: status.INVALID_ARGUMENT,
      at: PRUNE_AT,
      events: () => {
        const out = baseEvents();
        out[PRUNE_AT] = { type: 'tool/result', data: toolResultData('c0', '[pruned]', { id: 'another-id' }), surfaceOp: { op: 'replace', start: 2, end: 2 }, sourceEventSeqs: [2] };
        return out;
      },
    },
    {
      what: 'a canonical prune that does not keep the message id found through a chain of prunes chunks back',
      reason: 'TOOL_RESULT_REPLACE_NON_CONTENT',
      code: status.INVALID_ARGUMENT,
      at: CHAIN_AT,
      events: () => chainEvents('legacy-message:imp:2'),
    },
    {
      what: 'in strict mode, a turn/start while the turn opened chunks back is still open',
      reason: 'INV_TURN_ALREADY_OPEN',
      code: status.FAILED_PRECONDITION,
      strict: true,
      at: N - 1,
      events: () => strictEvents({ type: 'turn/start', data: { turn: 2 } }),
    },
    {
      what: 'a replace whose start was shadowed chunks back',
      reason: 'REPLACE_START_NOT_ON_SURFACE',
      code: status.FAILED_PRECONDITION,
      at: COMPACT_AT + 10,
      events: () => {
        const out = goodEvents();
        out[COMPACT_AT + 10] = assistant('again', { surfaceOp: { op: 'replace', start: 5, end: 12 }, sourceEventSeqs: [5, 6, 7, 8, 9, 10, 11, 12] }, 1, 3);
        return out;
      },
    },
    {
      what: 'a compaction citing too few of the nodes it shadows chunks back',
      reason: 'REPLACE_SOURCES_INCOMPLETE',
      code: status.INVALID_ARGUMENT,
      at: COMPACT_AT,
      events: () => {
        const out = goodEvents();
        out[COMPACT_AT] = assistant('summary', { surfaceOp: { op: 'replace', start: 3, end: 10 }, sourceEventSeqs: [3, 4, 5] }, 1, 3);
        return out;
      },
    },
    {
      what: 'a compaction that drops a tool call whose result stays (pairing guard on)',
      reason: 'TOOL_PAIRING_BROKEN',
      code: status.FAILED_PRECONDITION,
      pairingGuard: true,
      at: PRUNE_AT,
      events: () => {
        const out = baseEvents();
        out[PRUNE_AT] = assistant('summary of 1', { surfaceOp: { op: 'replace', start: 1, end: 1 }, sourceEventSeqs: [1] }, 1, 3);
        return out;
      },
    },
  ];

  for (const r of REFUSED) {
    it.skipIf(c.skip)(`refuses ${r.what} with ${r.reason}, as append does, and leaves no session`, async () => {
      const app = await service(c);
      const events = r.events();
      const err = await rejection(app.importJsonl(ctx, chunked(jsonl('imp', events)), { id: 'imp', pairingGuard: r.pairingGuard ?? false, strict: r.strict ?? false }));
      expect(err.reason, err.message).toBe(r.reason);
      expect(domainErrorToStatus(err).code).toBe(r.code);
      // The line of the refused event (the header is line 1).
      expect(err.metadata['line']).toBe(String(r.at + 2));
      await expect(app.getSession(ctx, 'imp')).rejects.toMatchObject({ reason: 'SESSION_NOT_FOUND' });
      expect(await app.store.getTenantUsage(ctx.tenant)).toEqual({ sessions: 0, dataBytes: 0 });

      // Append refuses the same event with the same reason, and keeps what came before.
      await appendAll(app, 'app', events.slice(0, r.at), r.pairingGuard ?? false, r.strict ?? false);
      const before = await view(app, 'app');
      const appended = await rejection(app.append(ctx, 'app', [{ ...(events[r.at] as CandidateEvent), seq: r.at, time: 2000 + r.at }]));
      expect(appended.reason).toBe(r.reason);
      expect(await view(app, 'app')).toEqual(before);
    });
  }
});
