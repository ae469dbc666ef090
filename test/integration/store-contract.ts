/**
 * The store contract: one suite every SessionStore implementation must pass with the same
 * results (test/integration/memory-store.test.ts, sqlite-store.test.ts).
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AppendOutcome, AppendRequest, IdempotencyRecord, NewSession, SessionStore } from '../../src/app/store-port.js';
import { storedSessionBytes } from '../../src/app/store-port.js';
import { DomainError } from '../../src/domain/errors.js';
import type { Json, SessionEvent, SessionHeader, SurfaceOp } from '../../src/domain/event.js';
import { StoreClosedError, StoreUsageError } from '../../src/store/store-errors.js';
import { multiWriterContract, type SharedDatabase } from './multi-writer-contract.js';
import { feedContract } from './feed-contract.js';

export { multiWriterContract, type SharedDatabase };

/** How the suite drives one implementation. */
export interface StoreHarness<S extends SessionStore> {
  /** A fresh, empty store. */
  open(): Promise<S>;
  /** Write transactions committed so far. */
  commits(store: S): number;
  /** Whether concurrent appends share one transaction (group commit). */
  readonly groupCommit: boolean;
  /**
   * A fresh, empty database that several store instances can open (runs the multi-writer
   * section, see multi-writer-contract.ts). Every store shared by processes must have it.
   */
  database?(): Promise<SharedDatabase<S>>;
  /**
   * Skip the load tests (200 concurrent clients, the random-sequence property), which exercise the
   * store's code rather than its schema: for extra targets that differ only in how the database
   * came to be (a migrated one), to keep the run short.
   */
  readonly lean?: boolean;
}

/** Builds an event; optional keys only when given. */
export function ev(
  seq: number,
  type = 'turn/start',
  data: Json = { turn: seq },
  extra: { sourceEventSeqs?: number[]; surfaceOp?: SurfaceOp; ignorable?: true; time?: number } = {},
): SessionEvent {
  const event: { -readonly [K in keyof SessionEvent]: SessionEvent[K] } = { type, seq, time: extra.time ?? 1_700_000_000_000 + seq, data };
  if (extra.sourceEventSeqs !== undefined) event.sourceEventSeqs = extra.sourceEventSeqs;
  if (extra.surfaceOp !== undefined) event.surfaceOp = extra.surfaceOp;
  if (extra.ignorable !== undefined) event.ignorable = extra.ignorable;
  return event;
}

/** The writer token test sessions are created with. */
export const WRITER0 = 'w0';
/** The owner of test imports. */
export const IMPORTER = 'importer-1';
/** A lease far in the future. */
export const LONG_LEASE = 8_000_000_000_000;

/** A new-session record with defaults (`pending: true` = owned by IMPORTER with a long lease). */
export function newSession(
  id: string,
  options: {
    createdAt?: number; labels?: Record<string, string>; tenant?: string; writer?: string; pairingGuard?: boolean;
    pending?: boolean | { owner: string; leaseUntil: number }; header?: Partial<SessionHeader>;
  } = {},
): NewSession {
  const pending = options.pending === true ? { owner: IMPORTER, leaseUntil: LONG_LEASE } : options.pending === false ? undefined : options.pending;
  return {
    header: { version: 0, id, createdAt: options.createdAt ?? 1_000, ...options.header },
    labels: options.labels ?? {},
    tenant: options.tenant ?? '',
    strict: false,
    pairingGuard: options.pairingGuard ?? false,
    writer: options.writer ?? WRITER0,
    ...(pending === undefined ? {} : { pending }),
  };
}

let writerCounter = 0;
/** A fresh writer token. */
export function freshWriter(): string {
  return `t${++writerCounter}`;
}

/** An append request with defaults (base token WRITER0, a fresh token, surface length 0). */
export function req(expectedNextSeq: number, events: readonly SessionEvent[], extra: Partial<AppendRequest> = {}): AppendRequest {
  return { expectedNextSeq, expectedWriter: WRITER0, writer: freshWriter(), events, surfaceLength: 0, ...extra };
}

/**
 * Appends on top of whatever is stored now (reads the stored writer token first): for tests that
 * are not about the token. `idempotency.surfaceLength` (when given) becomes the request's.
 */
export async function appendAt(
  store: SessionStore,
  id: string,
  expectedNextSeq: number,
  events: readonly SessionEvent[],
  idempotency?: IdempotencyRecord & { surfaceLength?: number },
  quota?: { tenant: string; maxBytes: number },
): Promise<AppendOutcome> {
  const rec = await store.getSession(id);
  const extra: Partial<AppendRequest> = { expectedWriter: rec?.writer ?? WRITER0, ...(quota === undefined ? {} : { quota }) };
  if (idempotency !== undefined) {
    return store.append(id, req(expectedNextSeq, events, {
      ...extra, idempotency: { key: idempotency.key, requestHash: idempotency.requestHash }, surfaceLength: idempotency.surfaceLength ?? 0,
    }));
  }
  return store.append(id, req(expectedNextSeq, events, extra));
}

/** What a session counts toward the byte quota (see SessionRecord.dataBytes). */
export function sessionBytes(record: NewSession, events: readonly SessionEvent[]): number {
  return storedSessionBytes(record.header, record.labels) + dataBytes(events);
}

/** A run of events seq from..from+n-1 cycling through a realistic mix of shapes. */
export function mixedEvents(from: number, n: number): SessionEvent[] {
  const out: SessionEvent[] = [];
  for (let seq = from; seq < from + n; seq++) {
    switch (seq % 5) {
      case 0:
        out.push(ev(seq, 'user/message', { id: `u${seq}`, role: 'user', content: [{ type: 'text', text: `hello ${seq}` }], source: { kind: 'user' } }, { surfaceOp: 'append' }));
        break;
      case 1:
        out.push(ev(seq, 'assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: 'é✓' } }));
        break;
      case 2:
        out.push(ev(seq, 'compaction/summary', { n: seq }, { sourceEventSeqs: [] }));
        break;
      case 3:
        out.push(ev(seq, 'tool/result', { message: { id: `t${seq}` } }, { surfaceOp: { op: 'replace', start: 0, end: 1 }, sourceEventSeqs: [seq - 1, seq - 3, 0] }));
        break;
      default:
        out.push(ev(seq, 'x-custom/thing', null, { ignorable: true }));
    }
  }
  return out;
}

function structural(e: SessionEvent): object {
  const row: Record<string, unknown> = { seq: e.seq, type: e.type };
  if (e.surfaceOp !== undefined) row.surfaceOp = e.surfaceOp;
  if (e.sourceEventSeqs !== undefined) row.sourceEventSeqs = e.sourceEventSeqs;
  if (e.ignorable !== undefined) row.ignorable = e.ignorable;
  return row;
}

function dataBytes(events: readonly SessionEvent[]): number {
  return events.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e.data), 'utf8'), 0);
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

/** Registers the contract suite for one implementation. */
export function storeContract<S extends SessionStore>(name: string, harness: StoreHarness<S>): void {
  if (harness.database) multiWriterContract(name, harness.database);
  feedContract(name, () => harness.open(), { ev, newSession, req, IMPORTER, LONG_LEASE }, harness.database);
  describe(`${name}: store contract`, () => {
    let store: S;
    beforeEach(async () => {
      store = await harness.open();
    });
    afterEach(async () => {
      await store.close();
    });

    describe('sessions', () => {
      it('creates a session with its initial log and reads it back; a second create with the same id is refused', async () => {
        const events = mixedEvents(0, 7);
        const record = newSession('s1', {
          createdAt: 5,
          labels: { team: 'a', 'odd key.$': 'v' },
          tenant: 't1',
          header: { cwd: '/work', parentSession: 'p', seedLength: 3, origin: 'subagent', delegationDepth: 1, agentPreset: 'coder' },
        });
        expect(await store.createSession({ ...record, strict: true, pairingGuard: true, writer: 'w-create' }, events)).toEqual({ kind: 'created' });
        const got = await store.getSession('s1');
        expect(got).toStrictEqual({
          header: { version: 0, id: 's1', createdAt: 5, cwd: '/work', parentSession: 'p', seedLength: 3, origin: 'subagent', delegationDepth: 1, agentPreset: 'coder' },
          labels: { team: 'a', 'odd key.$': 'v' },
          tenant: 't1',
          nextSeq: 7,
          eventCount: 7,
          dataBytes: sessionBytes(record, events),
          strict: true,
          pairingGuard: true,
          writer: 'w-create',
          metadataVersion: 0,
        });
        expect(await store.readEvents('s1', { fromSeq: 0, direction: 'forward', limit: 100 })).toStrictEqual(events);
        expect(await store.createSession(newSession('s1', { createdAt: 9 }), [])).toEqual({ kind: 'exists' });
        expect((await store.getSession('s1'))?.header.createdAt).toBe(5);
      });

      it('keeps absent header fields absent and reports an empty session', async () => {
        await store.createSession(newSession('bare'), []);
        const got = await store.getSession('bare');
        expect(got).toStrictEqual({
          header: { version: 0, id: 'bare', createdAt: 1_000 }, labels: {}, tenant: '', nextSeq: 0, eventCount: 0,
          dataBytes: sessionBytes(newSession('bare'), []), strict: false, pairingGuard: false, writer: WRITER0, metadataVersion: 0,
        });
        expect(Object.keys(got!.header)).toEqual(['version', 'id', 'createdAt']);
        expect(await store.getSession('nope')).toBeUndefined();
      });

      it('counts events apart from nextSeq for imported logs with seq gaps', async () => {
        const events = [ev(0), ev(2), ev(5)];
        await store.createSession(newSession('gaps'), events);
        expect(await store.getSession('gaps')).toMatchObject({ nextSeq: 6, eventCount: 3 });
        expect(await appendAt(store, 'gaps', 6, [ev(6)])).toEqual({ kind: 'appended' });
        expect(await store.getSession('gaps')).toMatchObject({ nextSeq: 7, eventCount: 4 });
      });

      it('lists newest first; pages concatenated equal the whole list; label and tenant filters paginate', async () => {
        const all: { id: string; createdAt: number; tenant: string; labels: Record<string, string> }[] = [];
        for (let i = 0; i < 37; i++) {
          const s: (typeof all)[number] = {
            id: `s${String(i).padStart(2, '0')}`,
            createdAt: 100 + (i % 7), // many ties on createdAt, broken by id desc
            tenant: i % 3 === 0 ? 'acme' : 'other',
            labels: i % 2 === 0 ? { env: 'prod', team: `t${i % 4}` } : { env: 'dev' },
          };
          all.push(s);
          await store.createSession(newSession(s.id, s), []);
        }
        await store.createSession(newSession('hidden', { createdAt: 104, pending: true, labels: { env: 'prod' } }), []);
        const order = (xs: typeof all) =>
          [...xs].sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1)).map((s) => s.id);

        const listAll = async (query: { tenant?: string; labels?: Record<string, string> }, pageSize: number) => {
          const ids: string[] = [];
          let token: string | undefined;
          let pages = 0;
          do {
            const page = await store.listSessions({ ...query, pageSize, ...(token === undefined ? {} : { pageToken: token }) });
            expect(page.sessions.length).toBeLessThanOrEqual(pageSize);
            ids.push(...page.sessions.map((s) => s.header.id));
            token = page.nextPageToken === '' ? undefined : page.nextPageToken;
            pages++;
            expect(pages).toBeLessThan(100);
          } while (token !== undefined);
          return ids;
        };

        for (const pageSize of [1, 4, 37, 100]) expect(await listAll({}, pageSize)).toEqual(order(all));
        expect(await listAll({ labels: { env: 'prod' } }, 3)).toEqual(order(all.filter((s) => s.labels.env === 'prod')));
        expect(await listAll({ labels: { env: 'prod', team: 't2' } }, 2)).toEqual(order(all.filter((s) => s.labels.team === 't2')));
        expect(await listAll({ labels: { env: 'nope' } }, 2)).toEqual([]);
        expect(await listAll({ tenant: 'acme' }, 5)).toEqual(order(all.filter((s) => s.tenant === 'acme')));
        expect(await listAll({ tenant: 'acme', labels: { env: 'prod' } }, 2)).toEqual(
          order(all.filter((s) => s.tenant === 'acme' && s.labels.env === 'prod')),
        );
        const exact = await store.listSessions({ pageSize: 37 });
        expect(exact.nextPageToken).toBe('');
        expect(exact.sessions[0]).toMatchObject({ header: { id: 's34', createdAt: 106 }, labels: { env: 'prod', team: 't2' }, tenant: 'other' });
      });

      it('keeps paginating correctly when sessions are created and deleted between pages', async () => {
        for (let i = 0; i < 10; i++) await store.createSession(newSession(`s${i}`, { createdAt: i }), []);
        const first = await store.listSessions({ pageSize: 4 });
        expect(first.sessions.map((s) => s.header.id)).toEqual(['s9', 's8', 's7', 's6']);
        await store.createSession(newSession('newer', { createdAt: 50 }), []);
        await store.deleteSession('s5');
        const second = await store.listSessions({ pageSize: 4, pageToken: first.nextPageToken });
        expect(second.sessions.map((s) => s.header.id)).toEqual(['s4', 's3', 's2', 's1']);
      });

      it('refuses a page token it did not issue', async () => {
        for (const pageToken of ['garbage!', Buffer.from('[1]').toString('base64url'), Buffer.from('{"a":1}').toString('base64url')]) {
          const error = await store.listSessions({ pageSize: 2, pageToken }).catch((e: unknown) => e);
          expect(error).toBeInstanceOf(DomainError);
          expect((error as DomainError).reason).toBe('INVALID_PAGE_TOKEN');
        }
        await expect(store.listSessions({ pageSize: 0 })).rejects.toThrow(RangeError);
      });

      it('deletes a session with its events and idempotency records; the id can be reused from scratch', async () => {
        await store.createSession(newSession('d'), mixedEvents(0, 3));
        expect(await appendAt(store, 'd', 3, [ev(3)], { key: 'k1', requestHash: 'h1' })).toEqual({ kind: 'appended' });
        expect(await store.deleteSession('d')).toBe(true);
        expect(await store.deleteSession('d')).toBe(false);
        expect(await store.getSession('d')).toBeUndefined();
        expect(await store.readEvents('d', { fromSeq: 0, direction: 'forward', limit: 10 })).toEqual([]);
        expect(await store.getIdempotent('d', 'k1')).toBeUndefined();
        expect(await appendAt(store, 'd', 0, [ev(0)])).toEqual({ kind: 'not-found' });

        await store.createSession(newSession('d'), []);
        expect(await store.getSession('d')).toMatchObject({ nextSeq: 0, eventCount: 0, dataBytes: sessionBytes(newSession('d'), []) });
        expect(await store.readStructure('d', 0)).toEqual([]);
        expect(await store.getIdempotent('d', 'k1')).toBeUndefined();
        expect(await appendAt(store, 'd', 0, [ev(0)], { key: 'k1', requestHash: 'h2' })).toEqual({ kind: 'appended' });
        expect((await store.listSessions({ pageSize: 10 })).sessions.map((s) => s.header.id)).toEqual(['d']);
      });

      it('deletes conditionally: a moved head, another creation time or a pending session keeps the session untouched', async () => {
        await store.createSession(newSession('c'), mixedEvents(0, 3));
        const seen = (await store.getSession('c'))!;
        const expected = { nextSeq: seen.nextSeq, createdAt: seen.header.createdAt };
        expect(await appendAt(store, 'c', 3, [ev(3)])).toEqual({ kind: 'appended' });
        // The head moved since `seen`: kept, log and counters untouched.
        const usage = await store.getTenantUsage('');
        expect(await store.deleteSession('c', expected)).toBe(false);
        expect(await store.getSession('c')).toMatchObject({ nextSeq: 4, eventCount: 4 });
        expect((await store.readEvents('c', { fromSeq: 0, direction: 'forward', limit: 10 })).map((e) => e.seq)).toEqual([0, 1, 2, 3]);
        expect(await store.getTenantUsage('')).toEqual(usage);
        expect(await store.deleteSession('c', { nextSeq: 4, createdAt: seen.header.createdAt + 1 })).toBe(false);
        expect(await store.getSession('c')).toBeDefined();
        // The current head and creation time: deleted.
        expect(await store.deleteSession('c', { nextSeq: 4, createdAt: seen.header.createdAt })).toBe(true);
        expect(await store.getSession('c')).toBeUndefined();
        expect(await store.deleteSession('c', { nextSeq: 4, createdAt: seen.header.createdAt })).toBe(false);
        // A pending session (an import in progress) is never deleted conditionally.
        await store.createSession({ ...newSession('p'), pending: { owner: 'imp', leaseUntil: Number.MAX_SAFE_INTEGER } }, []);
        expect(await store.deleteSession('p', { nextSeq: 0, createdAt: newSession('p').header.createdAt })).toBe(false);
        expect(await store.deletePending('p', 'imp')).toBe(true);
      });
    });

    describe('append', () => {
      it('appends conditionally and updates the counters', async () => {
        await store.createSession(newSession('a'), [ev(0)]);
        const batch = mixedEvents(1, 4);
        expect(await appendAt(store, 'a', 1, batch)).toEqual({ kind: 'appended' });
        expect(await store.getSession('a')).toMatchObject({ nextSeq: 5, eventCount: 5, dataBytes: sessionBytes(newSession('a'), [ev(0), ...batch]) });
        expect(await appendAt(store, 'a', 5, [])).toEqual({ kind: 'appended' });
        expect(await store.getSession('a')).toMatchObject({ nextSeq: 5, eventCount: 5 });
      });

      it('reports a moved head as a conflict and leaves the state untouched', async () => {
        await store.createSession(newSession('c'), mixedEvents(0, 3));
        const before = await store.getSession('c');
        const eventsBefore = await store.readEvents('c', { fromSeq: 0, direction: 'forward', limit: 10 });
        expect(await appendAt(store, 'c', 2, [ev(2)], { key: 'k', requestHash: 'h' })).toEqual({ kind: 'conflict', actualNextSeq: 3 });
        expect(await appendAt(store, 'c', 7, [ev(7)])).toEqual({ kind: 'conflict', actualNextSeq: 3 });
        expect(await store.getSession('c')).toStrictEqual(before);
        expect(await store.readEvents('c', { fromSeq: 0, direction: 'forward', limit: 10 })).toStrictEqual(eventsBefore);
        expect(await store.getIdempotent('c', 'k')).toBeUndefined();
      });

      it('is a compare-and-set on the writer token too: a batch planned on a batch that failed never commits, whatever the head', async () => {
        await store.createSession(newSession('ep'), [ev(0)]);
        // Another writer takes seq 1 first; the pipeline's batch for seq 1 conflicts, and its next
        // batch (planned on top of it, expecting head 2) must be refused although the head is 2.
        const other = store.append('ep', req(1, [ev(1, 'note', { by: 'other' })], { writer: 'other-1' }));
        const mine1 = store.append('ep', req(1, [ev(1, 'note', { by: 'me' })], { writer: 'mine-1' }));
        const mine2 = store.append('ep', req(2, [ev(2, 'note', { by: 'me' })], { expectedWriter: 'mine-1', writer: 'mine-2' }));
        expect(await other).toEqual({ kind: 'appended' });
        expect(await mine1).toEqual({ kind: 'conflict', actualNextSeq: 2 });
        expect(await mine2).toEqual({ kind: 'conflict', actualNextSeq: 2 });
        expect(await store.getSession('ep')).toMatchObject({ nextSeq: 2, writer: 'other-1' });
        // Still refused later; a batch re-planned on what is stored (its token) appends.
        expect(await store.append('ep', req(2, [ev(2, 'note', { by: 'me' })], { expectedWriter: 'mine-1' }))).toEqual({ kind: 'conflict', actualNextSeq: 2 });
        expect(await store.append('ep', req(2, [ev(2, 'note', { by: 'me' })], { expectedWriter: 'other-1', writer: 'mine-3' }))).toEqual({ kind: 'appended' });
        const log = await store.readEvents('ep', { fromSeq: 0, direction: 'forward', limit: 10 });
        expect(log.map((e) => [e.seq, e.data])).toEqual([[0, { turn: 0 }], [1, { by: 'other' }], [2, { by: 'me' }]]);
        expect(await store.getSession('ep')).toMatchObject({ nextSeq: 3, writer: 'mine-3' });
      });

      it('leaves a new writer token with every committed write, empty batches included', async () => {
        await store.createSession(newSession('wt'), []);
        expect(await store.append('wt', req(0, [], { writer: 'e1' }))).toEqual({ kind: 'appended' });
        expect(await store.getSession('wt')).toMatchObject({ nextSeq: 0, writer: 'e1' });
        // The old token no longer matches, even at the same head.
        expect(await store.append('wt', req(0, [ev(0)]))).toEqual({ kind: 'conflict', actualNextSeq: 0 });
        expect(await store.getSession('wt')).toMatchObject({ nextSeq: 0, eventCount: 0, writer: 'e1' });
        expect(await store.append('wt', req(0, [ev(0)], { expectedWriter: 'e1', writer: 'e2' }))).toEqual({ kind: 'appended' });
      });

      it('answers a reused idempotency key with the stored result, whatever the head, appending nothing', async () => {
        await store.createSession(newSession('i'), []);
        expect(await appendAt(store, 'i', 0, [ev(0), ev(1)], { key: 'req-1', requestHash: 'abc' })).toEqual({ kind: 'appended' });
        expect(await store.getIdempotent('i', 'req-1')).toEqual({ seqs: [0, 1], requestHash: 'abc', surfaceLength: 0 });
        const again = await appendAt(store, 'i', 0, [ev(0), ev(1)], { key: 'req-1', requestHash: 'abc' });
        expect(again).toEqual({ kind: 'duplicate', result: { seqs: [0, 1], requestHash: 'abc', surfaceLength: 0 } });
        expect(await appendAt(store, 'i', 2, [ev(2)], { key: 'req-1', requestHash: 'other' })).toEqual({
          kind: 'duplicate',
          result: { seqs: [0, 1], requestHash: 'abc', surfaceLength: 0 },
        });
        expect(await store.getSession('i')).toMatchObject({ nextSeq: 2, eventCount: 2 });
        expect(await store.getIdempotent('i', 'nope')).toBeUndefined();
        // Keys are per session.
        await store.createSession(newSession('j'), []);
        expect(await appendAt(store, 'j', 0, [ev(0)], { key: 'req-1', requestHash: 'x' })).toEqual({ kind: 'appended' });
        expect(await appendAt(store, 'i', 2, [], { key: 'empty', requestHash: 'e' })).toEqual({ kind: 'appended' });
        expect(await store.getIdempotent('i', 'empty')).toEqual({ seqs: [], requestHash: 'e', surfaceLength: 0 });
      });

      it('keeps the surface length of the original response with the key', async () => {
        await store.createSession(newSession('sl'), []);
        expect(await appendAt(store, 'sl', 0, [ev(0)], { key: 'a', requestHash: 'h', surfaceLength: 7 })).toEqual({ kind: 'appended' });
        expect(await appendAt(store, 'sl', 1, [], { key: 'z', requestHash: 'h', surfaceLength: 0 })).toEqual({ kind: 'appended' });
        expect(await store.getIdempotent('sl', 'a')).toStrictEqual({ seqs: [0], requestHash: 'h', surfaceLength: 7 });
        expect(await store.getIdempotent('sl', 'z')).toStrictEqual({ seqs: [], requestHash: 'h', surfaceLength: 0 });
        expect(await appendAt(store, 'sl', 1, [ev(1)], { key: 'a', requestHash: 'h', surfaceLength: 9 })).toEqual({
          kind: 'duplicate',
          result: { seqs: [0], requestHash: 'h', surfaceLength: 7 },
        });
      });

      it('reports unknown and pending sessions as not found', async () => {
        expect(await appendAt(store, 'ghost', 0, [ev(0)])).toEqual({ kind: 'not-found' });
        await store.createSession(newSession('p', { pending: true }), []);
        expect(await appendAt(store, 'p', 0, [ev(0)])).toEqual({ kind: 'not-found' });
      });

      it('refuses events whose seqs do not ascend from the expected head (a caller bug)', async () => {
        await store.createSession(newSession('b'), [ev(0)]);
        await expect(appendAt(store, 'b', 1, [ev(1), ev(1)])).rejects.toThrow(StoreUsageError);
        await expect(appendAt(store, 'b', 1, [ev(0)])).rejects.toThrow(StoreUsageError);
        await expect(store.createSession(newSession('b2'), [ev(1), ev(0)])).rejects.toThrow(StoreUsageError);
        expect(await store.getSession('b')).toMatchObject({ nextSeq: 1, eventCount: 1 });
      });

      for (const sessions of [1, 20]) {
        it.skipIf(harness.lean === true)(`loses and duplicates nothing under 200 concurrent clients on ${sessions} session(s), retrying on conflict`, async () => {
          for (let s = 0; s < sessions; s++) await store.createSession(newSession(`cc${s}`), []);
          const client = async (c: number): Promise<number> => {
            const id = `cc${c % sessions}`;
            for (let attempt = 1; ; attempt++) {
              const { nextSeq: head, writer } = (await store.getSession(id))!;
              const outcome = await store.append(id, req(head, [ev(head, 'user/message', { client: c })], {
                expectedWriter: writer, idempotency: { key: `client-${c}`, requestHash: `h${c}` }, surfaceLength: c,
              }));
              if (outcome.kind === 'appended' || outcome.kind === 'duplicate') return attempt;
              expect(outcome.kind).toBe('conflict');
              expect(attempt).toBeLessThan(1000);
            }
          };
          await Promise.all(Array.from({ length: 200 }, (_, c) => client(c)));
          const seen = new Set<number>();
          for (let s = 0; s < sessions; s++) {
            const events = await store.readEvents(`cc${s}`, { fromSeq: 0, direction: 'forward', limit: 1000 });
            expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
            expect(await store.getSession(`cc${s}`)).toMatchObject({ nextSeq: events.length, eventCount: events.length });
            for (const e of events) {
              const c = (e.data as { client: number }).client;
              expect(seen.has(c)).toBe(false);
              expect(c % sessions).toBe(s);
              seen.add(c);
              expect(await store.getIdempotent(`cc${s}`, `client-${c}`)).toEqual({ seqs: [e.seq], requestHash: `h${c}`, surfaceLength: c });
            }
          }
          expect(seen.size).toBe(200);
        });
      }

      it('settles each call of a concurrent group on its own: a conflict or duplicate does not roll back the others', async () => {
        await store.createSession(newSession('g1'), []);
        await store.createSession(newSession('g2'), []);
        const outcomes = await Promise.all([
          store.append('g1', req(0, [ev(0, 'a')], { writer: 'wa', idempotency: { key: 'k', requestHash: 'h' }, surfaceLength: 1 })),
          store.append('g1', req(0, [ev(0, 'b')], { writer: 'wb' })),
          store.append('g1', req(1, [ev(1, 'c')], { expectedWriter: 'wa', writer: 'wc', idempotency: { key: 'k', requestHash: 'h' } })),
          store.append('ghost', req(0, [ev(0)])),
          store.append('g2', req(0, [ev(0, 'd'), ev(1, 'e')])),
          store.append('g1', req(1, [ev(1, 'f')], { expectedWriter: 'wa', writer: 'wf' })),
        ]);
        expect(outcomes).toEqual([
          { kind: 'appended' },
          { kind: 'conflict', actualNextSeq: 1 },
          { kind: 'duplicate', result: { seqs: [0], requestHash: 'h', surfaceLength: 1 } },
          { kind: 'not-found' },
          { kind: 'appended' },
          { kind: 'appended' },
        ]);
        const types = async (id: string) => (await store.readEvents(id, { fromSeq: 0, direction: 'forward', limit: 10 })).map((e) => e.type);
        expect(await types('g1')).toEqual(['a', 'f']);
        expect(await types('g2')).toEqual(['d', 'e']);
      });

      if (harness.groupCommit) {
        it('commits concurrent appends from one event-loop turn in a single transaction', async () => {
          for (let s = 0; s < 64; s++) await store.createSession(newSession(`gc${s}`), []);
          const before = harness.commits(store);
          const outcomes = await Promise.all(Array.from({ length: 64 }, (_, s) => store.append(`gc${s}`, req(0, [ev(0), ev(1)], { writer: 'w1' }))));
          expect(outcomes.every((o) => o.kind === 'appended')).toBe(true);
          expect(harness.commits(store) - before).toBe(1);
          const again = await Promise.all(Array.from({ length: 64 }, (_, s) => store.append(`gc${s % 8}`, req(2, [ev(2)], { expectedWriter: 'w1' }))));
          expect(again.filter((o) => o.kind === 'appended')).toHaveLength(8);
          expect(harness.commits(store) - before).toBe(2);
        });
      }
    });

    describe('reads', () => {
      const events = mixedEvents(0, 25);
      beforeEach(async () => {
        await store.createSession(newSession('r'), events.slice(0, 10));
        expect(await appendAt(store, 'r', 10, events.slice(10))).toEqual({ kind: 'appended' });
      });

      it('reads forward and backward from a seq with a limit', async () => {
        expect(await store.readEvents('r', { fromSeq: 0, direction: 'forward', limit: 100 })).toStrictEqual(events);
        expect(await store.readEvents('r', { fromSeq: 7, direction: 'forward', limit: 3 })).toStrictEqual(events.slice(7, 10));
        expect(await store.readEvents('r', { fromSeq: 7, direction: 'backward', limit: 3 })).toStrictEqual([events[7], events[6], events[5]]);
        expect(await store.readEvents('r', { fromSeq: 1000, direction: 'backward', limit: 2 })).toStrictEqual([events[24], events[23]]);
        expect(await store.readEvents('r', { fromSeq: 2, direction: 'backward', limit: 10 })).toStrictEqual([events[2], events[1], events[0]]);
        expect(await store.readEvents('r', { fromSeq: 25, direction: 'forward', limit: 10 })).toEqual([]);
        expect(await store.readEvents('r', { fromSeq: 0, direction: 'forward', limit: 0 })).toEqual([]);
        expect(await store.readEvents('nope', { fromSeq: 0, direction: 'forward', limit: 10 })).toEqual([]);
      });

      it('filters by type in both directions', async () => {
        const types = ['user/message', 'tool/result'];
        const wanted = events.filter((e) => types.includes(e.type));
        expect(await store.readEvents('r', { fromSeq: 0, direction: 'forward', limit: 100, types })).toStrictEqual(wanted);
        expect(await store.readEvents('r', { fromSeq: 6, direction: 'forward', limit: 3, types })).toStrictEqual(wanted.filter((e) => e.seq >= 6).slice(0, 3));
        expect(await store.readEvents('r', { fromSeq: 19, direction: 'backward', limit: 3, types })).toStrictEqual(
          wanted.filter((e) => e.seq <= 19).reverse().slice(0, 3),
        );
        expect(await store.readEvents('r', { fromSeq: 0, direction: 'forward', limit: 100, types: [] })).toStrictEqual(events);
        expect(await store.readEvents('r', { fromSeq: 0, direction: 'forward', limit: 100, types: ['none'] })).toEqual([]);
      });

      it('reads events with their data as the stored JSON text, with the same paging and filters', async () => {
        const asText = (e: SessionEvent): Record<string, unknown> => {
          const { data, ...rest } = e;
          return { ...rest, dataText: JSON.stringify(data) };
        };
        const queries = [
          { fromSeq: 0, direction: 'forward' as const, limit: 100 },
          { fromSeq: 7, direction: 'backward' as const, limit: 3 },
          { fromSeq: 6, direction: 'forward' as const, limit: 3, types: ['user/message', 'tool/result'] },
          { fromSeq: 19, direction: 'backward' as const, limit: 3, types: ['user/message', 'tool/result'] },
          { fromSeq: 0, direction: 'forward' as const, limit: 0 },
        ];
        for (const q of queries) {
          const texts = await store.readEventTexts('r', q);
          // dataBytes is optional; when a store gives it, it is the text's UTF-8 length.
          for (const t of texts) if (t.dataBytes !== undefined) expect(t.dataBytes).toBe(Buffer.byteLength(t.dataText));
          expect(texts.map(({ dataBytes: _, ...t }) => t)).toStrictEqual((await store.readEvents('r', q)).map(asText));
          for (const t of texts) expect(JSON.parse(t.dataText)).toStrictEqual(events[t.seq]!.data);
        }
        expect(await store.readEventTexts('nope', queries[0]!)).toEqual([]);
      });

      it('gets events by seq, ascending, omitting missing ones', async () => {
        expect(await store.getEvents('r', [12, 3, 99, 3, 0])).toStrictEqual([events[0], events[3], events[12]]);
        expect(await store.getEvents('r', [])).toEqual([]);
        expect(await store.getEvents('nope', [1])).toEqual([]);
      });

      it('reads the structure: [] distinct from absent sourceEventSeqs, ignorable present only when set', async () => {
        const rows = await store.readStructure('r', 0);
        expect(rows).toStrictEqual(events.map(structural));
        expect(rows[2]).toStrictEqual({ seq: 2, type: 'compaction/summary', sourceEventSeqs: [] });
        expect(rows[1]).toStrictEqual({ seq: 1, type: 'assistant/chunk' });
        expect(Object.keys(rows[4]!)).toEqual(['seq', 'type', 'ignorable']);
        expect(await store.readStructure('r', 20)).toStrictEqual(events.slice(20).map(structural));
        // Paged: at most `limit` rows; pages concatenated are the whole structure.
        expect(await store.readStructure('r', 3, 5)).toStrictEqual(events.slice(3, 8).map(structural));
        const pages: unknown[] = [];
        for (let from = 0; ;) {
          const page = await store.readStructure('r', from, 7);
          pages.push(...page);
          if (page.length < 7) break;
          from = page[page.length - 1]!.seq + 1;
        }
        expect(pages).toStrictEqual(events.map(structural));
        expect(await store.readStructure('nope', 0)).toEqual([]);
      });

      it('reads the structure of a long log completely, from any seq', async () => {
        const long = mixedEvents(0, 9_000);
        await store.createSession(newSession('long'), long);
        expect(await store.readStructure('long', 0)).toStrictEqual(long.map(structural));
        expect(await store.readStructure('long', 4_095)).toStrictEqual(long.slice(4_095).map(structural));
        expect(await store.readStructure('long', 8_999)).toStrictEqual([structural(long[8_999]!)]);
      });

      it('keeps any type string and large seqs intact in the structure', async () => {
        const odd = [
          ev(0, '\t', null),
          ev(1, '12\t:x', null, { surfaceOp: 'append' }),
          ev(2, ':\t-\t1', null, { sourceEventSeqs: [1], ignorable: true }),
          ev(3, 'é✓\n', null, { surfaceOp: { op: 'replace', start: 0, end: 2 }, sourceEventSeqs: [] }),
          ev(Number.MAX_SAFE_INTEGER - 1, 'big', null, { sourceEventSeqs: [Number.MAX_SAFE_INTEGER - 2, 0] }),
        ];
        await store.createSession(newSession('odd'), odd);
        expect(await store.readStructure('odd', 0)).toStrictEqual(odd.map(structural));
        expect(await store.readEvents('odd', { fromSeq: 0, direction: 'forward', limit: 10 })).toStrictEqual(odd);
      });

      it('reads the surface structure of a prefix: surface rows only, without citations, and the prefix head', async () => {
        const read = store.readSurfaceStructure?.bind(store);
        // Optional port method (issue #14): the app replays stores without it from readStructure.
        if (read === undefined) return;
        const surfaceRows = (toSeq: number): object[] =>
          events.filter((e) => e.seq <= toSeq && e.surfaceOp !== undefined).map((e) => ({ seq: e.seq, type: e.type, surfaceOp: e.surfaceOp }));
        for (const toSeq of [0, 1, 2, 3, 12, 24, 1_000]) {
          expect(await read('r', toSeq), `to ${toSeq}`).toStrictEqual({ rows: surfaceRows(toSeq), headSeq: Math.min(toSeq, 24) });
        }
        // Citations and the ignorable flag of surface rows are left out; any type string survives.
        const odd = [
          ev(0, '\t', null, { ignorable: true }),
          ev(1, '12\t:x', null, { surfaceOp: 'append', sourceEventSeqs: [0] }),
          ev(4, 'é✓\n\t-', null, { surfaceOp: { op: 'replace', start: 1, end: 1 }, sourceEventSeqs: [], ignorable: true }),
          ev(7, 'note', null),
        ];
        await store.createSession(newSession('odd-surface'), odd);
        expect(await read('odd-surface', 3)).toStrictEqual({ rows: [{ seq: 1, type: '12\t:x', surfaceOp: 'append' }], headSeq: 1 });
        expect(await read('odd-surface', 9)).toStrictEqual({
          rows: [{ seq: 1, type: '12\t:x', surfaceOp: 'append' }, { seq: 4, type: 'é✓\n\t-', surfaceOp: { op: 'replace', start: 1, end: 1 } }],
          headSeq: 7,
        });
        expect(await read('nope', 5)).toStrictEqual({ rows: [], headSeq: undefined });
      });

      it('scans in ascending batches', async () => {
        const batches = await collect(store.scanEvents('r', 3, 5));
        expect(batches.map((b) => b.length)).toEqual([5, 5, 5, 5, 2]);
        expect(batches.flat()).toStrictEqual(events.slice(3));
        expect((await collect(store.scanEvents('r', 0, 25))).map((b) => b.length)).toEqual([25]);
        expect(await collect(store.scanEvents('r', 25, 5))).toEqual([]);
        expect(await collect(store.scanEvents('nope', 0, 5))).toEqual([]);
      });

      it('returns copies the caller cannot use to alter the log', async () => {
        const [first] = await store.readEvents('r', { fromSeq: 0, direction: 'forward', limit: 1 });
        try {
          (first!.data as { id: string }).id = 'mutated';
        } catch {
          // frozen: fine
        }
        const [again] = await store.readEvents('r', { fromSeq: 0, direction: 'forward', limit: 1 });
        expect(again).toStrictEqual(events[0]);
      });
    });

    describe('quotas (tenant counters in the write transaction)', () => {
      it('counts sessions (pending ones too) and refuses a create over the session quota, storing nothing', async () => {
        const quota = { maxSessions: 2, maxBytes: 0 };
        expect(await store.createSession(newSession('q1', { tenant: 't' }), [], quota)).toEqual({ kind: 'created' });
        expect(await store.createSession(newSession('q2', { tenant: 't', pending: true }), [], quota)).toEqual({ kind: 'created' });
        expect(await store.createSession(newSession('q3', { tenant: 't' }), [ev(0)], quota)).toEqual({
          kind: 'quota-exceeded', limitName: 'tenant_max_sessions', limit: 2, actual: 2,
        });
        expect(await store.getSession('q3')).toBeUndefined();
        expect(await store.getTenantUsage('t')).toMatchObject({ sessions: 2 });
        // Other tenants have their own counters; a delete frees a slot.
        expect(await store.createSession(newSession('o1', { tenant: 'other' }), [], quota)).toEqual({ kind: 'created' });
        expect(await store.deleteSession('q2')).toBe(true);
        expect(await store.createSession(newSession('q3', { tenant: 't' }), [], quota)).toEqual({ kind: 'created' });
        expect(await store.getTenantUsage('t')).toMatchObject({ sessions: 2 });
        expect(await store.getTenantUsage('nobody')).toEqual({ sessions: 0, dataBytes: 0 });
        // The metrics' view of every tenant (palimpsest_tenant_sessions) agrees with the counters.
        const counts = await store.tenantSessionCounts?.();
        expect(counts?.get('t')).toBe(2);
        expect(counts?.get('other')).toBe(1);
        expect(counts?.has('nobody')).toBe(false);
      });

      it('counts header, labels and event data bytes; refuses an append, create or import chunk over the byte quota, leaving the log untouched', async () => {
        const rec = newSession('b', { tenant: 'bt', labels: { team: 'x' } });
        const first = [ev(0, 'note', { text: 'a'.repeat(50) })];
        expect(await store.createSession(rec, first)).toEqual({ kind: 'created' });
        const used = sessionBytes(rec, first);
        expect(await store.getTenantUsage('bt')).toEqual({ sessions: 1, dataBytes: used });
        const big = [ev(1, 'note', { text: 'b'.repeat(100) })];
        const limit = used + dataBytes(big) - 1;
        const before = await store.getSession('b');
        expect(await appendAt(store, 'b', 1, big, undefined, { tenant: 'bt', maxBytes: limit })).toEqual({
          kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit, actual: used + dataBytes(big),
        });
        expect(await store.getSession('b')).toStrictEqual(before);
        expect(await store.readEvents('b', { fromSeq: 0, direction: 'forward', limit: 10 })).toHaveLength(1);
        // Exactly at the limit is fine.
        expect(await appendAt(store, 'b', 1, big, undefined, { tenant: 'bt', maxBytes: limit + 1 })).toEqual({ kind: 'appended' });
        expect(await store.getTenantUsage('bt')).toEqual({ sessions: 1, dataBytes: limit + 1 });
        const rec2 = newSession('b2', { tenant: 'bt' });
        expect(await store.createSession(rec2, [], { maxSessions: 0, maxBytes: limit + 1 })).toMatchObject({ kind: 'quota-exceeded', limitName: 'tenant_max_bytes' });
        expect(await store.createSession(newSession('imp', { tenant: 'bt', pending: true }), [], { maxSessions: 0, maxBytes: limit + 1000 })).toEqual({ kind: 'created' });
        const chunk = [ev(0, 'note', { text: 'c'.repeat(2000) })];
        expect(await store.appendPending('imp', chunk, { owner: IMPORTER, leaseUntil: LONG_LEASE, quota: { tenant: 'bt', maxBytes: limit + 1000 } })).toMatchObject({
          kind: 'quota-exceeded', limitName: 'tenant_max_bytes', limit: limit + 1000,
        });
        expect((await store.getTenantUsage('bt')).dataBytes).toBe(limit + 1 + sessionBytes(newSession('imp', { tenant: 'bt' }), []));
        expect(await store.deleteSession('imp')).toBe(true);
        expect(await store.deleteSession('b')).toBe(true);
        expect(await store.getTenantUsage('bt')).toEqual({ sessions: 0, dataBytes: 0 });
      });
    });

    describe('pending sessions (streamed import)', () => {
      it('are invisible until published, take chunks without a head check, then behave like any session', async () => {
        expect(await store.createSession(newSession('imp', { pending: true, labels: { k: 'v' } }), mixedEvents(0, 3))).toEqual({ kind: 'created' });
        expect(await store.appendPending('imp', mixedEvents(3, 4), { owner: IMPORTER, leaseUntil: LONG_LEASE })).toEqual({ kind: 'appended' });
        await store.appendPending('imp', [ev(9), ev(12)], { owner: IMPORTER, leaseUntil: LONG_LEASE });
        expect(await store.getSession('imp')).toBeUndefined();
        expect((await store.listSessions({ pageSize: 10 })).sessions).toEqual([]);
        expect((await store.listSessions({ pageSize: 10, labels: { k: 'v' } })).sessions).toEqual([]);
        expect(await store.readEvents('imp', { fromSeq: 0, direction: 'forward', limit: 100 })).toEqual([]);
        expect(await store.readStructure('imp', 0)).toEqual([]);
        if (store.readSurfaceStructure) expect(await store.readSurfaceStructure('imp', 10)).toStrictEqual({ rows: [], headSeq: undefined });
        expect(await store.getEvents('imp', [0])).toEqual([]);
        expect(await appendAt(store, 'imp', 13, [ev(13)])).toEqual({ kind: 'not-found' });
        expect(await store.createSession(newSession('imp'), [])).toEqual({ kind: 'exists' });

        await expect(store.publishSession('imp', 'someone-else')).rejects.toThrow(StoreUsageError);
        await store.publishSession('imp', IMPORTER);
        const all = [...mixedEvents(0, 7), ev(9), ev(12)];
        expect(await store.getSession('imp')).toMatchObject({ nextSeq: 13, eventCount: 9, dataBytes: sessionBytes(newSession('imp', { labels: { k: 'v' } }), all) });
        expect(await store.readEvents('imp', { fromSeq: 0, direction: 'forward', limit: 100 })).toStrictEqual(all);
        expect(await appendAt(store, 'imp', 13, [ev(13)])).toEqual({ kind: 'appended' });
        expect((await store.listSessions({ pageSize: 10 })).sessions.map((s) => s.header.id)).toEqual(['imp']);
      });

      it('getPendingEvents reads back an import\'s own stored chunks by seq, for its owner only', async () => {
        await store.createSession(newSession('imp', { pending: true }), mixedEvents(0, 3));
        await store.appendPending('imp', [ev(5), ev(7)], { owner: IMPORTER, leaseUntil: LONG_LEASE });
        const all = [...mixedEvents(0, 3), ev(5), ev(7)];
        // Ascending, without duplicates, missing seqs omitted, the events as stored.
        expect(await store.getPendingEvents('imp', IMPORTER, [7, 1, 6, 1, 0])).toStrictEqual([all[0], all[1], all[4]]);
        expect(await store.getPendingEvents('imp', IMPORTER, [])).toEqual([]);
        await expect(store.getPendingEvents('imp', 'another-process', [0])).rejects.toThrow(/owned by another/);
        await expect(store.getPendingEvents('ghost', IMPORTER, [0])).rejects.toThrow(StoreUsageError);
        // Once published it is an ordinary session: read it through getEvents.
        await store.publishSession('imp', IMPORTER);
        await expect(store.getPendingEvents('imp', IMPORTER, [0])).rejects.toThrow(StoreUsageError);
        expect(await store.getEvents('imp', [7])).toStrictEqual([all[4]]);
      });

      it('refuse chunks out of order or for sessions that are not pending; an aborted import can be deleted', async () => {
        await store.createSession(newSession('imp', { pending: true }), [ev(0), ev(1)]);
        const lease = { owner: IMPORTER, leaseUntil: LONG_LEASE };
        await expect(store.appendPending('imp', [ev(1)], lease)).rejects.toThrow(StoreUsageError);
        await expect(store.appendPending('imp', [ev(2)], { ...lease, owner: 'another-process' })).rejects.toThrow(/owned by another/);
        await store.createSession(newSession('live'), []);
        await expect(store.appendPending('live', [ev(0)], lease)).rejects.toThrow(StoreUsageError);
        await expect(store.appendPending('ghost', [ev(0)], lease)).rejects.toThrow(StoreUsageError);
        await expect(store.publishSession('ghost', IMPORTER)).rejects.toThrow(StoreUsageError);
        expect(await store.deleteSession('imp')).toBe(true);
        await expect(store.publishSession('imp', IMPORTER)).rejects.toThrow(StoreUsageError);
      });

      it('deletePending deletes only a pending session owned by the caller, with the tenant counters', async () => {
        const rec = newSession('imp', { tenant: 'dp', pending: true });
        await store.createSession(rec, [ev(0)]);
        await store.appendPending('imp', [ev(1)], { owner: IMPORTER, leaseUntil: LONG_LEASE });
        const usage = await store.getTenantUsage('dp');
        expect(usage).toEqual({ sessions: 1, dataBytes: sessionBytes(newSession('imp', { tenant: 'dp' }), [ev(0), ev(1)]) });
        // Another importer's pending session, a ghost: refused, nothing changed.
        expect(await store.deletePending('imp', 'another-process')).toBe(false);
        expect(await store.deletePending('ghost', IMPORTER)).toBe(false);
        expect(await store.getTenantUsage('dp')).toEqual(usage);
        expect(await store.appendPending('imp', [ev(2)], { owner: IMPORTER, leaseUntil: LONG_LEASE })).toEqual({ kind: 'appended' });
        // The owner's delete: gone with its events and counter shares.
        expect(await store.deletePending('imp', IMPORTER)).toBe(true);
        expect(await store.getTenantUsage('dp')).toEqual({ sessions: 0, dataBytes: 0 });
        await expect(store.publishSession('imp', IMPORTER)).rejects.toThrow(StoreUsageError);
        expect(await store.deletePending('imp', IMPORTER)).toBe(false);
        // A live (published) session with the same id is never touched, even by its former importer.
        await store.createSession(newSession('imp', { tenant: 'dp', pending: true }), [ev(0)]);
        await store.publishSession('imp', IMPORTER);
        expect(await appendAt(store, 'imp', 1, [ev(1)])).toEqual({ kind: 'appended' });
        const live = await store.getSession('imp');
        const liveUsage = await store.getTenantUsage('dp');
        expect(await store.deletePending('imp', IMPORTER)).toBe(false);
        expect(await store.getSession('imp')).toStrictEqual(live);
        expect(await store.readEvents('imp', { fromSeq: 0, direction: 'forward', limit: 10 })).toStrictEqual([ev(0), ev(1)]);
        expect(await store.getTenantUsage('dp')).toEqual(liveUsage);
      });
    });

    it('flushes queued appends on close and refuses use afterwards', async () => {
      await store.createSession(newSession('z'), []);
      const pending = store.append('z', req(0, [ev(0)]));
      await store.close();
      expect(await pending).toEqual({ kind: 'appended' });
      await expect(store.getSession('z')).rejects.toThrow(StoreClosedError);
      await expect(store.append('z', req(1, [ev(1)]))).rejects.toThrow(StoreClosedError);
      store = await harness.open(); // afterEach closes it
    });

    it.skipIf(harness.lean === true)('property: any sequence of appends reads back exactly as appended (JSON-equal, key presence kept)', async () => {
      const json = fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.parse(JSON.stringify(v)) as Json);
      const surfaceOp: fc.Arbitrary<SurfaceOp> = fc.oneof(
        fc.constant('append' as const),
        fc.record({ op: fc.constant('replace' as const), start: fc.nat(1000), end: fc.nat(1000) }).map((op) => ({ ...op })),
      );
      const shape = fc.record(
        {
          type: fc.string({ minLength: 1, maxLength: 20 }),
          time: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
          data: json,
          sourceEventSeqs: fc.array(fc.nat({ max: Number.MAX_SAFE_INTEGER }), { maxLength: 6 }),
          surfaceOp,
          ignorable: fc.constant(true as const),
        },
        { requiredKeys: ['type', 'time', 'data'] },
      );
      const plan = fc.record({
        initial: fc.array(shape, { maxLength: 4 }),
        batches: fc.array(fc.record({ events: fc.array(shape, { maxLength: 4 }), gap: fc.nat(3) }), { maxLength: 6 }),
      });
      let run = 0;
      await fc.assert(
        fc.asyncProperty(plan, async ({ initial, batches }) => {
          const id = `prop-${run++}`;
          let next = 0;
          const number = (shapes: typeof initial, gap: number): SessionEvent[] => {
            if (shapes.length > 0) next += gap;
            return shapes.map((s) => ({ ...s, seq: next++ }) as SessionEvent);
          };
          const expected = number(initial, 0);
          await store.createSession(newSession(id), expected);
          for (const batch of batches) {
            const head = next;
            const events = number(batch.events, batch.gap);
            expect(await appendAt(store, id, head, events)).toEqual({ kind: 'appended' });
            expected.push(...events);
          }
          const read = await store.readEvents(id, { fromSeq: 0, direction: 'forward', limit: 10_000 });
          expect(read).toStrictEqual(expected);
          expect(read.map((e) => Object.keys(e).sort())).toEqual(expected.map((e) => Object.keys(e).sort()));
          expect(await store.readStructure(id, 0)).toStrictEqual(expected.map(structural));
          expect(await store.getSession(id)).toMatchObject({ eventCount: expected.length, nextSeq: next, dataBytes: sessionBytes(newSession(id), expected) });
        }),
        { numRuns: 60 },
      );
    });
  });
}
