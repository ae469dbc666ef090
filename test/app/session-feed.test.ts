/**
 * The session feed (issue #35) at the app tier over the memory store: SessionFeed subscriptions
 * (catch-up, caught-up, live, resume, from_now, selector, tenants, another service's commits, a
 * slow subscriber), UpdateSession, and wait_for_create.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, DEFAULT_LIMITS, SessionService, type CallContext } from '../../src/app/session-service.js';
import { StoreChangeFeed } from '../../src/app/store-change-feed.js';
import type { FeedItem, FeedSubscription, SessionChange } from '../../src/app/session-feed.js';
import { Subscription } from '../../src/app/subscription.js';
import { type EventItem } from '../../src/app/subscription-items.js';
import { eventSource } from '../../src/app/subscription-sources.js';
import { waitForSession } from '../../src/app/wait-for-session.js';
import { MemoryDatabase, MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { DomainError } from '../../src/domain/errors.js';
import { user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
let database: MemoryDatabase;
let services: SessionService[];

function service(opts: { pollMs?: number; bufferRecords?: number } = {}): SessionService {
  const store = new MemorySessionStore({ database });
  const s = new SessionService(store, DEFAULT_LIMITS, Date.now, undefined, undefined, new StoreChangeFeed(store.openHeadWatch()), opts);
  services.push(s);
  return s;
}

beforeEach(() => {
  database = new MemoryDatabase();
  services = [];
});
afterEach(async () => {
  for (const s of services) await s.close();
});

/** Pulls `n` items (fails after `ms`). */
async function pull(sub: FeedSubscription, n: number, ms = 5000): Promise<FeedItem[]> {
  const out: FeedItem[] = [];
  const deadline = Date.now() + ms;
  while (out.length < n) {
    let timer: NodeJS.Timeout | undefined;
    const it = await Promise.race([sub.next(), new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), Math.max(1, deadline - Date.now())); })]);
    clearTimeout(timer);
    if (it === 'timeout') throw new Error(`timed out after ${out.length} of ${n} items: ${JSON.stringify(out)}`);
    if (it === undefined) throw new Error('subscription ended');
    out.push(it);
  }
  return out;
}

const brief = (it: FeedItem): string => (it.kind === 'caught-up' ? 'caught-up' : `${it.change} ${it.sessionId}${it.change === 'appended' ? ` head=${it.headSeq}` : ''}`);

async function rejection(p: Promise<unknown>): Promise<DomainError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error('expected a rejection');
}

describe('SubscribeSessions (app)', () => {
  it('catch-up, caught-up, then live; positions ascend; a resume after any position gets exactly the rest', async () => {
    const app = service();
    await app.createSession(ctx, { id: 'a', labels: { team: 'x' } });
    await app.append(ctx, 'a', [user('hello'), user('again')]);
    const sub = await app.sessionFeed.subscribe(ctx, {});
    const first = await pull(sub, 3);
    expect(first.map(brief)).toEqual(['created a', 'appended a head=1', 'caught-up']);
    const appended = first[1] as SessionChange;
    expect(appended).toMatchObject({ eventCount: 2, surfaceLength: 2, eventTypes: ['user/message'], labels: { team: 'x' } });
    // Live.
    await app.createSession(ctx, { id: 'b' });
    await app.append(ctx, 'b', [user('b1')]);
    await app.deleteSession(ctx, 'a');
    const live = await pull(sub, 3);
    expect(live.map(brief)).toEqual(['created b', 'appended b head=0', 'deleted a']);
    const all = [...first, ...live].filter((i) => i.kind === 'change');
    const positions = all.map((i) => i.position);
    expect([...positions].sort((x, y) => x - y)).toEqual(positions);
    expect(sub.cursor).toBe(positions[positions.length - 1]);
    sub.close();
    for (let k = 0; k < all.length; k++) {
      const again = await app.sessionFeed.subscribe(ctx, { after: all[k]!.position });
      const rest = await pull(again, all.length - k - 1 + 1);
      expect(rest.map(brief)).toEqual([...all.slice(k + 1).map(brief), 'caught-up']);
      again.close();
    }
  });

  it('from_now skips the history; after beyond the end is CURSOR_OUT_OF_RANGE; a negative after is INVALID_ARGUMENT', async () => {
    const app = service();
    await app.createSession(ctx, { id: 'old' });
    const sub = await app.sessionFeed.subscribe(ctx, { fromNow: true });
    expect((await pull(sub, 1)).map(brief)).toEqual(['caught-up']);
    await app.createSession(ctx, { id: 'new' });
    expect((await pull(sub, 1)).map(brief)).toEqual(['created new']);
    expect((await rejection(app.sessionFeed.subscribe(ctx, { after: 99 }))).reason).toBe('CURSOR_OUT_OF_RANGE');
    expect((await rejection(app.sessionFeed.subscribe(ctx, { after: -1 }))).reason).toBe('INVALID_ARGUMENT');
  });

  it('a label selector keeps matching sessions and reports a session leaving it; the cursor moves past the rest', async () => {
    const app = service();
    const sub = await app.sessionFeed.subscribe(ctx, { selector: { team: 'x' } });
    expect((await pull(sub, 1)).map(brief)).toEqual(['caught-up']);
    await app.createSession(ctx, { id: 'other', labels: { team: 'y' } });
    await app.createSession(ctx, { id: 'mine', labels: { team: 'x' } });
    await app.updateSession(ctx, 'mine', { setLabels: { team: 'z' } });
    await app.append(ctx, 'mine', [user('not matching any more')]);
    await app.updateSession(ctx, 'other', { setLabels: { team: 'x' } });
    const got = await pull(sub, 3);
    expect(got.map(brief)).toEqual(['created mine', 'labels_changed mine', 'labels_changed other']);
    expect(got[1]).toMatchObject({ labels: { team: 'z' }, previousLabels: { team: 'x' } });
    expect(sub.cursor).toBe(await app.store.feedEnd(''));
  });

  it('a tenant sees only its own sessions', async () => {
    const app = service();
    const t1: CallContext = { tenant: 't1' };
    const t2: CallContext = { tenant: 't2' };
    const sub1 = await app.sessionFeed.subscribe(t1, {});
    const sub2 = await app.sessionFeed.subscribe(t2, {});
    await pull(sub1, 1);
    await pull(sub2, 1);
    await app.createSession(t1, { id: 'same' });
    await app.createSession(t2, { id: 'same' });
    await app.append(t2, 'same', [user('t2 only')]);
    expect((await pull(sub1, 1)).map(brief)).toEqual(['created same']);
    expect((await pull(sub2, 2)).map(brief)).toEqual(['created same', 'appended same head=0']);
    // Nothing more for t1 (its next item would be t2's append).
    await app.createSession(t1, { id: 'later' });
    expect((await pull(sub1, 1)).map(brief)).toEqual(['created later']);
  });

  it("another service's commits over the same store reach the subscriber (the poll), in order", async () => {
    const a = service();
    const b = service({ pollMs: 10 });
    const sub = await b.sessionFeed.subscribe(ctx, {});
    await pull(sub, 1);
    await a.createSession(ctx, { id: 'x' });
    for (let i = 0; i < 5; i++) await a.append(ctx, 'x', [user(`m${i}`)]);
    expect((await pull(sub, 6)).map(brief)).toEqual(['created x', ...[0, 1, 2, 3, 4].map((h) => `appended x head=${h}`)]);
  });

  it('a subscriber that does not read falls back to the store and still gets every change once, in order', async () => {
    const app = service({ bufferRecords: 2 });
    const sub = await app.sessionFeed.subscribe(ctx, {});
    await pull(sub, 1);
    await app.createSession(ctx, { id: 's' });
    for (let i = 0; i < 20; i++) await app.append(ctx, 's', [user(`m${i}`)]);
    const got = await pull(sub, 21 + 1);
    expect(got.map(brief)).toEqual(['created s', ...Array.from({ length: 20 }, (_, h) => `appended s head=${h}`), 'caught-up']);
    expect(sub.fallbacks).toBeGreaterThan(0);
  });
});

describe('UpdateSession (app)', () => {
  it('sets and removes labels, bumps the metadata version, and refuses a stale expected version leaving the labels untouched', async () => {
    const app = service();
    await app.createSession(ctx, { id: 's', labels: { a: '1', b: '2' } });
    await app.append(ctx, 's', [user('hot')]);
    const v0 = await app.getSession(ctx, 's');
    expect(v0.record.metadataVersion).toBe(0);
    const updated = await app.updateSession(ctx, 's', { setLabels: { c: '3', a: 'one' }, removeLabels: ['b', 'absent'], expectedVersion: 0 });
    expect(updated.record.labels).toEqual({ a: 'one', c: '3' });
    expect(updated.record.metadataVersion).toBe(1);
    const stale = await rejection(app.updateSession(ctx, 's', { setLabels: { d: '4' }, expectedVersion: 0 }));
    expect(stale.reason).toBe('METADATA_VERSION_MISMATCH');
    expect(stale.metadata).toMatchObject({ expectedVersion: '0', actualVersion: '1' });
    expect((await app.getSession(ctx, 's')).record).toMatchObject({ labels: { a: 'one', c: '3' }, metadataVersion: 1 });
    // Unconditional: applies on top of the current version.
    expect((await app.updateSession(ctx, 's', { removeLabels: ['c'] })).record).toMatchObject({ labels: { a: 'one' }, metadataVersion: 2 });
  });

  it('refuses a key both set and removed, labels over the limits, and an unknown session, changing nothing', async () => {
    const app = service();
    await app.createSession(ctx, { id: 's', labels: { a: '1' } });
    expect((await rejection(app.updateSession(ctx, 's', { setLabels: { a: '2' }, removeLabels: ['a'] }))).reason).toBe('INVALID_ARGUMENT');
    const many: Record<string, string> = {};
    for (let i = 0; i < 64; i++) many[`k${i}`] = 'v';
    expect((await rejection(app.updateSession(ctx, 's', { setLabels: many }))).reason).toBe('TOO_MANY_LABELS');
    expect((await rejection(app.updateSession(ctx, 's', { setLabels: { ['x'.repeat(200)]: 'v' } }))).reason).toBe('FIELD_TOO_LONG');
    expect((await rejection(app.updateSession(ctx, 'nope', { setLabels: { a: '2' } }))).reason).toBe('SESSION_NOT_FOUND');
    expect((await rejection(app.updateSession({ tenant: 'other' }, 's', { setLabels: { a: '2' } }))).reason).toBe('SESSION_NOT_FOUND');
    expect((await app.getSession(ctx, 's')).record).toMatchObject({ labels: { a: '1' }, metadataVersion: 0 });
  });

  it('another service reading the hot session sees the new labels', async () => {
    const a = service();
    const b = service();
    await a.createSession(ctx, { id: 's', labels: { a: '1' } });
    expect((await b.getSession(ctx, 's')).record.labels).toEqual({ a: '1' });
    await a.updateSession(ctx, 's', { setLabels: { a: '2' } });
    expect((await b.getSession(ctx, 's')).record).toMatchObject({ labels: { a: '2' }, metadataVersion: 1 });
  });
});

describe('wait_for_create (app)', () => {
  it('a subscription opened before the session exists waits for its creation, then follows it', async () => {
    const app = service();
    const opening = Subscription.open(app, ctx, 'later', eventSource(app, 'later'), { bufferBytes: 1 << 20, sizeOf: () => 1 }, () => true);
    let opened = false;
    void opening.then(() => { opened = true; });
    await new Promise((r) => setTimeout(r, 20));
    expect(opened).toBe(false);
    await app.createSession(ctx, { id: 'later' });
    await app.append(ctx, 'later', [user('first')]);
    const sub = await opening;
    const items: EventItem[] = [];
    while (items.length < 2) items.push((await sub.next())!);
    expect(items.map((i) => (i.kind === 'event' ? i.event.type : i.kind))).toContain('user/message');
    sub.close();
  });

  it('without it, a missing session fails at once; a wait whose caller left ends with CANCELLED', async () => {
    const app = service();
    expect((await rejection(Subscription.open(app, ctx, 'nope', eventSource(app, 'nope'), { bufferBytes: 1 << 20, sizeOf: () => 1 })))).toMatchObject({ reason: 'SESSION_NOT_FOUND' });
    let wanted = true;
    const waiting = rejection(waitForSession(app, ctx, 'never', () => wanted));
    wanted = false;
    expect((await waiting).reason).toBe('CANCELLED');
    expect(app.sessionFeed.subscribers).toBe(0);
  });
});

describe('export/import keep labels and the pairing guard (metadata trailer)', () => {
  async function exported(app: SessionService, id: string): Promise<string> {
    const lines: string[] = [];
    for await (const b of app.exportJsonl(ctx, id)) lines.push(...b);
    return lines.join('\n') + '\n';
  }
  async function* bytes(text: string): AsyncGenerator<Uint8Array> {
    yield Buffer.from(text);
  }

  it('labels and pairing_guard survive a round trip; the log is the same; the trailer is not stored', async () => {
    const app = service();
    await app.createSession(ctx, { id: 'src', labels: { team: 'x', 'palimpsest.dev/ttl-days': '7' }, pairingGuard: true });
    await app.append(ctx, 'src', [user('one'), user('two')]);
    const text = await exported(app, 'src');
    const last = JSON.parse(text.trim().split('\n').pop()!) as Record<string, unknown>;
    expect(last).toMatchObject({ type: 'palimpsest/session-metadata', seq: 2, ignorable: true, data: { labels: { team: 'x', 'palimpsest.dev/ttl-days': '7' }, pairingGuard: true } });
    const sub = await app.sessionFeed.subscribe(ctx, { fromNow: true });
    await pull(sub, 1);
    const view = await app.importJsonl(ctx, bytes(text), { id: 'copy' });
    expect(view.record).toMatchObject({ labels: { team: 'x', 'palimpsest.dev/ttl-days': '7' }, pairingGuard: true, metadataVersion: 0 });
    expect(view.eventCount).toBe(2);
    // Created once, with its labels (set in the publish), never labels_changed.
    const [created] = await pull(sub, 1);
    expect(created).toMatchObject({ change: 'created', sessionId: 'copy', labels: { team: 'x', 'palimpsest.dev/ttl-days': '7' } });
    // The copy exports the same file (its own id in the header).
    expect(await exported(app, 'copy')).toBe(text.replace('"id":"src"', '"id":"copy"'));
    // Labels given to the import win over the file's; the pairing guard asked for wins too.
    const other = await app.importJsonl(ctx, bytes(text), { id: 'copy2', labels: { team: 'y' }, pairingGuard: false });
    expect(other.record).toMatchObject({ labels: { team: 'y', 'palimpsest.dev/ttl-days': '7' }, pairingGuard: false });
  });

  it('a trailer that is not the last event is an ordinary ignorable event; a file without one imports as before', async () => {
    const app = service();
    await app.createSession(ctx, { id: 'plain', pairingGuard: false });
    await app.append(ctx, 'plain', [user('one')]);
    const plain = await exported(app, 'plain');
    expect(plain).not.toContain('palimpsest/session-metadata');
    expect((await app.importJsonl(ctx, bytes(plain), { id: 'plain-copy' })).record).toMatchObject({ labels: {}, pairingGuard: false });
    const trailerFirst = plain.trimEnd().split('\n');
    const mid = JSON.stringify({ type: 'palimpsest/session-metadata', seq: 1, time: 1, data: { labels: { a: 'b' }, pairingGuard: true }, ignorable: true });
    const moved = [...trailerFirst, mid, JSON.stringify({ ...JSON.parse(trailerFirst[1]!), seq: 2 })].join('\n') + '\n';
    const v = await app.importJsonl(ctx, bytes(moved), { id: 'mid' });
    expect(v.record).toMatchObject({ labels: {}, pairingGuard: false });
    expect(v.eventCount).toBe(3);
  });
});
