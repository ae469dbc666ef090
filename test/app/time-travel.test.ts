/**
 * Time travel: GetSurface / GetMessages `as_of_seq` equal a naive replay of the log prefix, for
 * every seq of the 36 reference fixtures and of random sessions with (nested) replaces and prunes.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import type { SessionStore } from '../../src/app/store-port.js';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent, SessionEvent } from '../../src/domain/event.js';
import { deriveMessages, deriveTranscript } from '../../src/domain/derive.js';
import { naiveFold } from '../support/naive-surface.js';
import { Harness, assistant, logEvent, rep, toolResult, user } from '../support/engine-harness.js';
import { rng } from '../support/rng.js';

const ctx = ANONYMOUS;
const DIR = new URL('../fixtures/reference-sessions/', import.meta.url);

async function logOf(app: SessionService, id: string): Promise<SessionEvent[]> {
  const out: SessionEvent[] = [];
  for await (const b of app.scan(ctx, id)) out.push(...b);
  return out;
}

function isEmptyAssistant(m: unknown): boolean {
  const o = m as { role?: unknown; content?: unknown };
  return o.role === 'assistant' && Array.isArray(o.content) && o.content.length === 0;
}

/** Compares every as-of read of `id` with the naive replay of each prefix. */
async function checkEverySeq(app: SessionService, id: string): Promise<number> {
  const log = await logOf(app, id);
  // The live transcript is append-only in log order, so at any past seq it was its prefix.
  const liveTranscript = (await app.getMessages(ctx, id, 'transcript')).messages;
  let checked = 0;
  for (let i = 0; i < log.length; i++) {
    const asOf = (log[i] as SessionEvent).seq;
    const prefix = log.slice(0, i + 1);
    const naive = naiveFold(prefix);
    const got = await app.getSurface(ctx, id, asOf);
    expect(got, `${id} as of ${asOf}`).toEqual({ seqs: naive.surface, replaceGeneration: naive.replaceGeneration, headSeq: asOf });
    const bySeq = new Map(prefix.map((e) => [e.seq, e] as const));
    const model = await app.getMessages(ctx, id, 'model', { asOfSeq: asOf });
    expect(model.messages.map((m) => m.message), `${id} model history as of ${asOf}`).toEqual(deriveMessages(naive.surface, (s) => bySeq.get(s), id));
    expect(model.headSeq).toBe(asOf);
    const transcript = await app.getMessages(ctx, id, 'transcript', { asOfSeq: asOf });
    expect(transcript.messages, `${id} transcript as of ${asOf}`).toEqual(liveTranscript.filter((m) => m.seq <= asOf));
    // The same entries as the domain's transcript, except assistant messages with empty content
    // (which the live GetMessages transcript keeps).
    expect(transcript.messages.filter((m) => !isEmptyAssistant(m.message))).toEqual(deriveTranscript(prefix, id).map((t) => ({ seq: t.seq, message: t.message })));
    checked++;
  }
  // The head itself equals the live reads.
  const head = log[log.length - 1];
  if (head !== undefined) {
    expect(await app.getSurface(ctx, id, head.seq)).toEqual(await app.getSurface(ctx, id));
    expect((await app.getMessages(ctx, id, 'model', { asOfSeq: head.seq })).messages).toEqual((await app.getMessages(ctx, id, 'model')).messages);
  }
  return checked;
}

describe('time travel over the reference fixtures', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.jsonl')).sort();

  it('covers the 36 fixtures', () => {
    expect(files).toHaveLength(36);
  });

  it.each(files)('%s: as_of_seq at every seq equals the replay of the prefix', async (file) => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    const bytes = readFileSync(new URL(file, DIR));
    // cordis-tool-round is a UI snapshot with seq gaps (imported with allowSeqGaps, as the reference seeds it).
    const v = await app.importJsonl(ctx, (async function* () { yield bytes; })(), { id: 'f', allowSeqGaps: file === 'cordis-tool-round.jsonl' });
    expect(await checkEverySeq(app, 'f')).toBe(v.eventCount);
  });
});

/** A random accepted log with tool rounds, nested compactions and prunes of pruned results. */
function randomLog(seed: number, steps: number): SessionEvent[] {
  const r = rng(seed);
  const h = new Harness();
  for (let i = 0; i < steps; i++) {
    const x = r();
    const surface = h.engine.surface();
    if (x < 0.3 || surface.length < 2) h.add(user(`u${i}`));
    else if (x < 0.5) h.add(assistant(r() < 0.2 ? '' : `a${i}`));
    else if (x < 0.6) h.add(logEvent('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'x' } }));
    else if (x < 0.75) {
      const callSeq = h.seqOf(logEvent('tool/call', { turn: 1, step: 1, callId: `c${i}`, name: 'read', arguments: '{}' }));
      h.add(toolResult(`c${i}`, `out ${i}`, { sourceEventSeqs: [callSeq] }));
    } else if (x < 0.9) {
      const a = Math.floor(r() * surface.length);
      const b = a + Math.floor(r() * (surface.length - a));
      const range = surface.slice(a, b + 1);
      h.add(user(`sum${i}`, rep(surface[a] as number, surface[b] as number), { sourceEventSeqs: range }));
    } else {
      const results = surface.filter((s) => h.engine.typeOf(s) === 'tool/result');
      const t = results[Math.floor(r() * results.length)];
      if (t === undefined) continue;
      const original = h.events.get(t) as SessionEvent;
      const d = JSON.parse(JSON.stringify(original.data)) as { message: { content: { content: unknown }[] } };
      d.message.content[0]!.content = [{ type: 'text', text: `pruned ${i}` }];
      h.add([
        logEvent('compaction/prune', { shadowedRange: { start: t, end: t }, shadowedSeqs: [t], shadowedTokenCount: 3 }),
        { type: 'tool/result', data: d, surfaceOp: rep(t, t), sourceEventSeqs: [t] } as CandidateEvent,
      ]);
    }
  }
  return h.log;
}

describe('time travel over random sessions with replaces', () => {
  it('as_of_seq at every seq equals the replay of the prefix (seeded)', async () => {
    const store = new MemorySessionStore();
    const app = new SessionService(store, undefined, () => 1);
    let replaces = 0;
    for (let seed = 1; seed <= 12; seed++) {
      const log = randomLog(seed * 7919, 80);
      replaces += log.filter((e) => typeof e.surfaceOp === 'object').length;
      await store.createSession({ header: { version: 0, id: `r${seed}`, createdAt: 1 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, log);
      expect(await checkEverySeq(app, `r${seed}`)).toBe(log.length);
    }
    expect(replaces).toBeGreaterThan(100);
  });

  // The SQLite store's surface-only replay (readSurfaceStructure) and the paged readStructure
  // fallback of stores without it give the same answers.
  const stores: [string, () => SessionStore][] = [
    ['sqlite (readSurfaceStructure)', () => new SqliteSessionStore({ path: ':memory:' })],
    ['a store without readSurfaceStructure (paged readStructure)', () => {
      const m = new MemorySessionStore();
      return new Proxy(m, { get: (target, prop) => (prop === 'readSurfaceStructure' ? undefined : Reflect.get(target, prop, target) as unknown) }) as SessionStore;
    }],
  ];
  it.each(stores)('%s: as_of_seq at every seq equals the replay of the prefix', async (_name, make) => {
    const store = make();
    const app = new SessionService(store, undefined, () => 1);
    for (let seed = 1; seed <= 4; seed++) {
      const log = randomLog(seed * 104729, 80);
      await store.createSession({ header: { version: 0, id: `s${seed}`, createdAt: 1 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, log);
      expect(await checkEverySeq(app, `s${seed}`)).toBe(log.length);
    }
    const bytes = readFileSync(new URL('cordis-tool-round.jsonl', DIR)); // imported with seq gaps
    await app.importJsonl(ctx, (async function* () { yield bytes; })(), { id: 'gaps', allowSeqGaps: true });
    await checkEverySeq(app, 'gaps');
    await store.close();
  });

  it('refuses a seq after the head (AS_OF_SEQ_AFTER_HEAD, OUT_OF_RANGE) and an empty session', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    await app.createSession(ctx, { id: 'e' });
    await expect(app.getSurface(ctx, 'e', 0)).rejects.toMatchObject({ reason: 'AS_OF_SEQ_AFTER_HEAD' });
    await app.append(ctx, 'e', [user('a'), user('b')]);
    const err = await app.getMessages(ctx, 'e', 'model', { asOfSeq: 2 }).then(() => undefined, (e: unknown) => e as DomainError);
    expect(err?.reason).toBe('AS_OF_SEQ_AFTER_HEAD');
    expect(err?.metadata).toMatchObject({ asOfSeq: '2', headSeq: '1' });
    expect((await app.getSurface(ctx, 'e', 0)).seqs).toEqual([0]);
  });
});
