/**
 * ListEvents pages encoded by the SQLite checksum extension (palimpsest_event_page, through
 * SqliteSessionStore.readEncodedEventPage): byte for byte what the server writes from the rows
 * (readEventTexts, the handler's byte budget, the generated ListEventsResponse encoder), for any
 * log and any query; a damaged row anywhere in the rows read refuses the page as readEventTexts
 * does; a row the extension cannot encode hands the page back to the rows path; without the
 * extension there is no encoded page.
 */
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { DataCorruptedError } from '../../src/app/storage-error.js';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import type { EncodedEventPage, ReadEventsQuery } from '../../src/app/store-port.js';
import type { Json, SessionEvent, SurfaceOp } from '../../src/domain/event.js';
import { storedEventToProto } from '../../src/server/convert.js';
import { listEventsResponseOf } from '../../src/server/wire/event-encode.js';
import { EVENT_PAGE_FORMAT, pageEventBytes } from '../../src/server/wire/event-page.js';
import { structuralCrc } from '../../src/store/sqlite/integrity.js';
import { checksumExtensionPath } from '../../src/store/sqlite/sqlite-ext.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { ListEventsResponse } from '../../gen/palimpsest/v1/service.js';
import { ev, newSession } from './store-contract.js';
import { tempDbDir } from '../support/temp-db.js';

/** The extension is built by `npm install` (scripts/build-sqlite-ext.mjs); CI requires it. */
const NATIVE = checksumExtensionPath() !== undefined || process.env['CI'] === 'true';

const { freshPath } = tempDbDir('palimpsest-event-page-');
let store: SqliteSessionStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

/** What the server answers from the rows: the handler's page cut (src/server/handlers.ts listEvents, wire/event-page.ts pageEventBytes) and the generated encoder. */
async function fromRows(s: SqliteSessionStore, id: string, q: ReadEventsQuery, budget: number): Promise<EncodedEventPage> {
  const rows = await s.readEventTexts(id, { ...q, limit: q.limit + 1 });
  let nextSeq = rows.length > q.limit ? rows[q.limit]!.seq : undefined;
  // The handler's cut, as written there (src/server/handlers.ts listEvents): keep it the same.
  const kept = [];
  let used = 0;
  for (const e of rows.slice(0, q.limit)) {
    const size = pageEventBytes(Buffer.byteLength(e.dataText), Buffer.byteLength(e.type), e.sourceEventSeqs?.length ?? 0);
    if (kept.length > 0 && used + size > budget) {
      nextSeq = e.seq;
      break;
    }
    used += size;
    kept.push(e);
  }
  return { bytes: ListEventsResponse.encode({ events: kept.map((e) => storedEventToProto(e)), nextPageToken: '' }).finish(), count: kept.length, nextSeq, firstSeq: kept[0]?.seq, lastSeq: kept[kept.length - 1]?.seq };
}

async function encoded(s: SqliteSessionStore, id: string, q: ReadEventsQuery, budget: number): Promise<EncodedEventPage | undefined> {
  const page = await s.readEncodedEventPage(id, q, budget);
  return page === undefined ? undefined : { bytes: Uint8Array.from(page.bytes), count: page.count, nextSeq: page.nextSeq, firstSeq: page.firstSeq, lastSeq: page.lastSeq };
}

const TYPES = ['user/message', 'bench/tick', '', 'x\tcustom,type \u{1f600}', '日本語'];

/** An event of seq `seq` with any envelope the store keeps (the surface rules are the engine's, not the store's). */
const eventAt = (seq: number): fc.Arbitrary<SessionEvent> =>
  fc.record({
    type: fc.constantFrom(...TYPES),
    data: fc.json({ maxDepth: 3 }).map((t) => JSON.parse(t) as Json),
    time: fc.oneof(fc.constant(0), fc.constant(-1_234), fc.constant(Number.MAX_SAFE_INTEGER), fc.constant(-Number.MAX_SAFE_INTEGER), fc.integer({ min: 0, max: 2 ** 45 })),
    sources: fc.option(fc.array(fc.oneof(fc.integer({ min: 0, max: Math.max(seq, 0) }), fc.constant(Number.MAX_SAFE_INTEGER)), { maxLength: 6 }), { nil: undefined }),
    op: fc.oneof(
      fc.constant<SurfaceOp | undefined>(undefined),
      fc.constant<SurfaceOp>('append'),
      fc.record({ start: fc.nat(300), end: fc.nat(300) }).map(({ start, end }): SurfaceOp => ({ op: 'replace', start, end })),
    ),
    ignorable: fc.boolean(),
  }).map(({ type, data, time, sources, op, ignorable }) =>
    ev(seq, type, data, { time, ...(sources === undefined ? {} : { sourceEventSeqs: sources }), ...(op === undefined ? {} : { surfaceOp: op }), ...(ignorable ? { ignorable: true as const } : {}) }));

const logOf = (length: number): fc.Arbitrary<SessionEvent[]> => fc.tuple(...Array.from({ length }, (_, seq) => eventAt(seq)));

describe.skipIf(!NATIVE)('ListEvents pages encoded in SQLite (palimpsest_event_page)', () => {
  it('equal the rows path byte for byte: any log, direction, start, page size, type filter and byte budget', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 14 }).chain((length) => fc.tuple(
          logOf(length),
          fc.array(fc.record({
            fromSeq: fc.integer({ min: 0, max: length + 1 }),
            direction: fc.constantFrom<'forward' | 'backward'>('forward', 'backward'),
            limit: fc.integer({ min: 1, max: length + 2 }),
            types: fc.option(fc.subarray(TYPES, { minLength: 1 }), { nil: undefined }),
            budget: fc.oneof(fc.constant(1), fc.integer({ min: 60, max: 2_000 }), fc.constant(Math.floor(Number.MAX_SAFE_INTEGER * 0.9) - 4096)),
          }), { minLength: 1, maxLength: 6 }),
        )),
        async ([log, queries]) => {
          const s = new SqliteSessionStore({ path: freshPath(), nativeChecksums: 'require' });
          try {
            await s.createSession(newSession('p'), log);
            for (const { budget, ...q } of queries) {
              const got = await encoded(s, 'p', q, budget);
              expect(got).toEqual(await fromRows(s, 'p', q, budget));
            }
          } finally {
            await s.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a page is a ListEventsResponse once its token is added; an unknown session reads as no events', async () => {
    store = new SqliteSessionStore({ path: freshPath(), nativeChecksums: 'require' });
    const log = Array.from({ length: 5 }, (_, seq) => ev(seq, 'bench/tick', { n: seq, s: 'é✓' }, { surfaceOp: 'append' }));
    await store.createSession(newSession('s'), log);
    const page = (await store.readEncodedEventPage('s', { fromSeq: 1, direction: 'forward', limit: 3 }, 1_000_000))!;
    expect(page).toMatchObject({ count: 3, nextSeq: 4 });
    const decoded = ListEventsResponse.decode(listEventsResponseOf(page.bytes, 'next'));
    expect(decoded.nextPageToken).toBe('next');
    expect(decoded.events.map((e) => [e.seq, e.data?.kind?.$case === 'json' ? JSON.parse(e.data.kind.value) : undefined])).toEqual([[1, { n: 1, s: 'é✓' }], [2, { n: 2, s: 'é✓' }], [3, { n: 3, s: 'é✓' }]]);
    expect(await encoded(store, 's', { fromSeq: 5, direction: 'forward', limit: 3 }, 1_000_000)).toEqual({ bytes: new Uint8Array(0), count: 0, nextSeq: undefined });
    expect(await encoded(store, 'nope', { fromSeq: 0, direction: 'forward', limit: 3 }, 1_000_000)).toEqual({ bytes: new Uint8Array(0), count: 0, nextSeq: undefined });
  });

  it('a damaged row refuses the page (session, seq), also as the one row read past the page; the rows before it and other pages are served', async () => {
    const path = freshPath();
    store = new SqliteSessionStore({ path, nativeChecksums: 'require' });
    await store.createSession(newSession('s'), Array.from({ length: 10 }, (_, seq) => ev(seq, 'bench/tick', { n: seq })));
    await store.close();
    const raw = new Database(path);
    raw.prepare("UPDATE events SET data = replace(data, '5', '6') WHERE session_id = 's' AND seq = 5").run();
    raw.prepare("UPDATE events SET type = 'bench/tock' WHERE session_id = 's' AND seq = 8").run();
    raw.close();
    store = new SqliteSessionStore({ path, nativeChecksums: 'require' });
    const refused = async (q: ReadEventsQuery): Promise<DataCorruptedError> => {
      const e = await store!.readEncodedEventPage('s', q, 1_000_000).then(() => undefined, (err: unknown) => err);
      expect(e).toBeInstanceOf(DataCorruptedError);
      // The rows path refuses the same rows.
      await expect(store!.readEventTexts('s', { ...q, limit: q.limit + 1 })).rejects.toBeInstanceOf(DataCorruptedError);
      return e as DataCorruptedError;
    };
    expect(await refused({ fromSeq: 0, direction: 'forward', limit: 10 })).toMatchObject({ sessionId: 's', seq: 5, message: expect.stringMatching(/seq 5 failed its data checksum/) });
    expect(await refused({ fromSeq: 0, direction: 'forward', limit: 5 })).toMatchObject({ seq: 5 });
    expect(await refused({ fromSeq: 9, direction: 'backward', limit: 3 })).toMatchObject({ seq: 8, message: expect.stringMatching(/structural/) });
    expect(await store.readEncodedEventPage('s', { fromSeq: 0, direction: 'forward', limit: 4 }, 1_000_000)).toMatchObject({ count: 4, nextSeq: 4 });
    // A page cut by its byte budget still checks every row it read.
    await expect(store.readEncodedEventPage('s', { fromSeq: 3, direction: 'forward', limit: 4 }, 1)).rejects.toBeInstanceOf(DataCorruptedError);
  });

  it('a row it cannot encode (a surface op not in its stored form, checksum intact) hands the page back: undefined, and the rows path serves it', async () => {
    const path = freshPath();
    store = new SqliteSessionStore({ path, nativeChecksums: 'require' });
    await store.createSession(newSession('s'), [ev(0, 'user/message', { n: 0 }, { surfaceOp: 'append' }), ev(1, 'x/y', { n: 1 }, { surfaceOp: { op: 'replace', start: 0, end: 0 }, sourceEventSeqs: [0] })]);
    await store.close();
    const raw = new Database(path);
    const reordered = '{"op":"replace","end":0,"start":0}';
    raw.prepare('UPDATE events SET surface_op = ?, scrc = ? WHERE session_id = ? AND seq = 1').run(reordered, structuralCrc(1, reordered, Buffer.from([0]), null, 'x/y'), 's');
    raw.close();
    store = new SqliteSessionStore({ path, nativeChecksums: 'require' });
    expect(await store.readEncodedEventPage('s', { fromSeq: 0, direction: 'forward', limit: 10 }, 1_000_000)).toBeUndefined();
    expect(await store.readEncodedEventPage('s', { fromSeq: 1, direction: 'backward', limit: 1 }, 1_000_000)).toBeUndefined();
    // Read past the page only to find the next seq, the row is checked, not encoded.
    expect(await store.readEncodedEventPage('s', { fromSeq: 0, direction: 'forward', limit: 1 }, 1_000_000)).toMatchObject({ count: 1, nextSeq: 1 });
    expect((await store.readEventTexts('s', { fromSeq: 0, direction: 'forward', limit: 10 })).map((e) => e.surfaceOp)).toEqual(['append', { op: 'replace', start: 0, end: 0 }]);
  });
});

describe.skipIf(!NATIVE)('the page format is the server\'s (src/server/wire/event-page.ts)', () => {
  it('the extension writes the version the wire module declares', () => {
    store = new SqliteSessionStore({ path: freshPath(), nativeChecksums: 'require' });
    expect(store.eventPageFormat).toBe(EVENT_PAGE_FORMAT);
  });

  it('the app takes a store\'s pages only in the version the caller reads; another version is read as rows', async () => {
    store = new SqliteSessionStore({ path: freshPath(), nativeChecksums: 'require' });
    await store.createSession(newSession('v'), [ev(0)]);
    const app = new SessionService(store);
    const query = { fromSeq: 0, direction: 'forward' as const, pageSize: 10, encodedBudgetBytes: 1_000_000 };
    const same = await app.listEvents(ANONYMOUS, 'v', { ...query, encodedFormat: EVENT_PAGE_FORMAT });
    expect(same.encoded?.count).toBe(1);
    expect(same.events).toEqual([]);
    const other = await app.listEvents(ANONYMOUS, 'v', { ...query, encodedFormat: EVENT_PAGE_FORMAT + 1 });
    expect(other.encoded).toBeUndefined();
    expect(other.events.map((e) => e.seq)).toEqual([0]);
  });
});

describe('without the checksum extension', () => {
  it('there is no encoded page (the server reads the rows)', async () => {
    store = new SqliteSessionStore({ path: freshPath(), nativeChecksums: 'off' });
    expect(store.eventPageFormat).toBeUndefined();
    await store.createSession(newSession('s'), [ev(0)]);
    expect(await store.readEncodedEventPage('s', { fromSeq: 0, direction: 'forward', limit: 10 }, 1_000_000)).toBeUndefined();
  });
});
