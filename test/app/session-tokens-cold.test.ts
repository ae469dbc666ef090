/**
 * Issue #37: GetSession's token counts come from the token figures the store keeps with each
 * event row (domain/event-tokens.ts), never from a parse of the log's data. The figures after a
 * restart (a cold open: a new service, and for SQLite a new store over the same file) equal the
 * figures before it and the figures recomputed from the model history and the log, after appends,
 * a compaction replace, a prune, a fork, an import and legacy events, with and without blobs (the
 * blobbing store hands the figures of the data as appended down with its writes; a row whose
 * figures are unknown is estimated from its inflated event).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService } from '../../src/app/session-service.js';
import { BlobbingStore } from '../../src/app/blobbing-store.js';
import { CompactionService } from '../../src/app/compaction.js';
import { pruneToolResults } from '../../src/app/prune-tool-results.js';
import { sessionTokens, type SessionTokens } from '../../src/app/session-tokens.js';
import type { SessionStore } from '../../src/app/store-port.js';
import { hasTokenFigureReads } from '../../src/app/ports/capabilities.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import { addAssistantUsage, estimateMessageTokens, NO_USAGE } from '../../src/domain/token-estimate.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { assistant, toolResult, user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
const dir = mkdtempSync(join(tmpdir(), 'palimpsest-tokens-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function call(callId: string, usage: Record<string, number>): CandidateEvent {
  return {
    type: 'assistant/message',
    surfaceOp: 'append',
    data: { turn: 1, step: 1, usage, message: { id: `a-${callId}`, role: 'assistant', content: [{ type: 'tool-call', id: callId, name: 'read', arguments: '{"path":"/x"}' }], source: { kind: 'model', provider: 'p', model: 'm' } } },
  };
}

/** A log in the legacy unwrapped shapes (imported only), a steering message and an image block among them. */
function legacyJsonl(id: string): Buffer {
  const events = [
    { type: 'user/message', surfaceOp: 'append', data: { content: [{ type: 'text', text: 'legacy question é' }], source: { kind: 'user' } } },
    { type: 'assistant/message', surfaceOp: 'append', data: { turn: 1, step: 1, content: [{ type: 'text', text: 'legacy answer' }, { type: 'tool-call', id: 'L1', name: 'grep', arguments: '{"q":"a"}' }], provenance: { provider: 'p', model: 'm' }, usage: { inputTokens: 0.1, outputTokens: 3, cacheReadTokens: 0.2 } } },
    { type: 'tool/result', surfaceOp: 'append', data: { turn: 1, step: 1, callId: 'L1', content: [{ type: 'text', text: 'r'.repeat(900) }], isError: false } },
    { type: 'tool/result', surfaceOp: { op: 'replace', start: 2, end: 2 }, sourceEventSeqs: [2], data: { turn: 1, step: 1, callId: 'L1', content: [{ type: 'text', text: '[pruned]' }], isError: false } },
    { type: 'steering/message', surfaceOp: 'append', data: { turn: 1, content: [{ type: 'text', text: 'steer' }], source: { kind: 'user' } } },
    { type: 'user/message', surfaceOp: 'append', data: { id: 'img', role: 'user', source: { kind: 'user' }, content: [{ type: 'image', attachment: { mimeType: 'image/png', data: 'QUJD'.repeat(600) } }] } },
    { type: 'x/note', data: { usage: { inputTokens: 99 } } },
    { type: 'assistant/message', surfaceOp: 'append', data: { turn: 2, step: 1, content: [{ type: 'text', text: 'again' }], provenance: { provider: 'p', model: 'm' }, usage: { inputTokens: 0.7, outputTokens: 1, cacheWriteTokens: 5 } } },
  ];
  const lines = [JSON.stringify({ type: 'session', version: 0, id, createdAt: 1000 })];
  events.forEach((e, seq) => lines.push(JSON.stringify({ ...e, seq, time: 2000 + seq })));
  return Buffer.from(`${lines.join('\n')}\n`);
}

async function* once(b: Uint8Array): AsyncGenerator<Uint8Array> {
  yield b;
}

/** The counts recomputed from what they mean: the model history's estimate and the log's usage. */
async function recomputed(app: SessionService, id: string): Promise<SessionTokens> {
  const messages = (await app.getMessagesPage(ctx, id, 'model', 0, '', undefined)).messages;
  let usage = NO_USAGE;
  for await (const batch of app.scan(ctx, id)) for (const e of batch) if (e.type === 'assistant/message') usage = addAssistantUsage(usage, e.data);
  return { surfaceTokens: messages.reduce((a, m) => a + estimateMessageTokens(m.message), 0), usage };
}

/** Builds the sessions and returns their counts (checked against recomputed ones). */
async function build(app: SessionService): Promise<Map<string, SessionTokens>> {
  await app.createSession(ctx, { id: 's' });
  await app.append(ctx, 's', [
    user('q'.repeat(3000)),
    call('c1', { inputTokens: 100, outputTokens: 7, cacheReadTokens: 50, cacheWriteTokens: 3 }),
    toolResult('c1', 'tool output '.repeat(400)),
    assistant('done'),
    user('more ✓ 😀'),
    call('c2', { inputTokens: 0.1, outputTokens: 0.2 }),
    toolResult('c2', 'second output '.repeat(3000)),
    assistant('', { data: { turn: 2, step: 1, message: { id: 'empty', role: 'assistant', content: [], source: { kind: 'model', provider: 'p', model: 'm' } }, usage: { inputTokens: 0.3, outputTokens: 4 } } }),
    assistant('ok'),
  ]);
  const counts = new Map<string, SessionTokens>();
  counts.set('after appends', await sessionTokens(app, ctx, 's'));
  await pruneToolResults(app, ctx, 's', { seqs: [6] });
  counts.set('after a prune', await sessionTokens(app, ctx, 's'));
  const head = (await app.getSession(ctx, 's')).headSeq!;
  await new CompactionService(app).compact(ctx, 's', { start: 0, end: 3, expectedLastSeq: head, summary: [{ type: 'text', text: 'summary of the start' }], provider: 'p', model: 'm', usage: { inputTokens: 11, outputTokens: 2 } });
  counts.set('after a compaction', await sessionTokens(app, ctx, 's'));
  await app.fork(ctx, 's', { childId: 'f' });
  await app.append(ctx, 'f', [user('in the fork'), assistant('forked')]);
  await app.fork(ctx, 's', { childId: 'g', atSeq: 4 });
  await app.importJsonl(ctx, once(legacyJsonl('legacy')), { id: 'legacy' });
  for (const id of ['s', 'f', 'g', 'legacy']) {
    const t = await sessionTokens(app, ctx, id);
    expect(t, id).toEqual(await recomputed(app, id));
    counts.set(id, t);
  }
  return counts;
}

async function coldCounts(app: SessionService): Promise<Map<string, SessionTokens>> {
  const out = new Map<string, SessionTokens>();
  for (const id of ['s', 'f', 'g', 'legacy']) {
    out.set(id, await sessionTokens(app, ctx, id));
    expect(out.get(id), id).toEqual(await recomputed(app, id));
  }
  return out;
}

const stores: { name: string; open: (n: number) => SessionStore; reopen: (s: SessionStore, n: number) => SessionStore }[] = [
  { name: 'memory', open: () => new MemorySessionStore(), reopen: (s) => new MemorySessionStore({ database: (s as MemorySessionStore).database }) },
  {
    name: 'memory with blobs',
    open: () => new BlobbingStore(new MemorySessionStore(), 1024),
    reopen: (s) => new BlobbingStore(new MemorySessionStore({ database: ((s as BlobbingStore).inner as MemorySessionStore).database }), 1024),
  },
  { name: 'sqlite', open: (n) => new SqliteSessionStore({ path: join(dir, `t${n}.db`) }), reopen: (_s, n) => new SqliteSessionStore({ path: join(dir, `t${n}.db`) }) },
  { name: 'sqlite with blobs', open: (n) => new BlobbingStore(new SqliteSessionStore({ path: join(dir, `t${n}.db`) }), 1024), reopen: (_s, n) => new BlobbingStore(new SqliteSessionStore({ path: join(dir, `t${n}.db`) }), 1024) },
];

describe.each(stores.map((s, n) => ({ ...s, n })))('GetSession token counts on a cold open ($name)', ({ open, reopen, n }) => {
  it('after a restart equal the counts before it and the recomputed ones (appends, prune, compaction, fork, import, legacy events)', async () => {
    const store = open(n);
    expect(hasTokenFigureReads(store)).toBe(true);
    const app = new SessionService(store, DEFAULT_LIMITS, () => 1);
    const before = await build(app);
    expect(before.get('after a prune')!.surfaceTokens).toBeLessThan(before.get('after appends')!.surfaceTokens);
    expect(before.get('after a compaction')!.usage).toEqual(before.get('after a prune')!.usage);
    expect(before.get('legacy')!.usage).toEqual({ inputTokens: 0.1 + 0.7, outputTokens: 4, cacheReadTokens: 0.2, cacheWriteTokens: 5 });
    // Written through the blobbing store, the figures are the appended data's: none is unknown.
    const figured = await (store as SessionStore & { readTokenFigures(k: string, f: number): Promise<{ tokens: number[] }> }).readTokenFigures('s', 0);
    expect(figured.tokens.length).toBeGreaterThan(5);
    expect(figured.tokens.filter((t) => t < 0)).toEqual([]);
    const reopened = reopen(store, n);
    const cold = new SessionService(reopened, DEFAULT_LIMITS, () => 1);
    const after = await coldCounts(cold);
    for (const id of ['s', 'f', 'g', 'legacy']) expect(after.get(id), id).toEqual(before.get(id));
    await cold.close();
    await app.close();
  });
});

describe('rows whose figures the store does not know (tokens -1: a migrated row holding blob references)', () => {
  it('are estimated from their events; the counts stay exact', async () => {
    const path = join(dir, 'unknown.db');
    const app = new SessionService(new BlobbingStore(new SqliteSessionStore({ path }), 1024), DEFAULT_LIMITS, () => 1);
    const before = await build(app);
    await app.close();
    const db = new Database(path);
    const marked = db.prepare("UPDATE events SET tokens = -1, usage = NULL WHERE tokens IS NOT NULL AND seq % 2 = 1").run().changes;
    db.close();
    expect(marked).toBeGreaterThan(5);
    const cold = new SessionService(new BlobbingStore(new SqliteSessionStore({ path }), 1024), DEFAULT_LIMITS, () => 1);
    const after = await coldCounts(cold);
    for (const id of ['s', 'f', 'g', 'legacy']) expect(after.get(id), id).toEqual(before.get(id));
    await cold.close();
  });
});
