/**
 * The search contract (issue #40), run against every store: the same scenario on each store must
 * give the same hits as the memory store's scan (the reference), tenants never see each other's
 * sessions, and a deleted session leaves nothing findable. Each store's test file calls
 * {@link searchScenario} on a fresh app and compares with {@link searchScenario} on memory.
 */
import { expect } from 'vitest';
import type { CallContext, SessionService } from '../../src/app/session-service.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import type { SearchRequest } from '../../src/app/search-service.js';
import type { SearchIndex } from '../../src/app/search-port.js';
import { parseSearchQuery } from '../../src/domain/search-query.js';

export const ACME: CallContext = { tenant: 'acme' };
export const BETA: CallContext = { tenant: 'beta' };

export const user = (id: string, text: string, surfaceOp: unknown = 'append'): CandidateEvent => ({
  type: 'user/message', data: { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } }, surfaceOp,
});
export const assistant = (id: string, text: string, calls: [string, string, string][] = [], reasoning?: string): CandidateEvent => ({
  type: 'assistant/message',
  data: {
    turn: 1, step: 1,
    message: {
      id, role: 'assistant', source: { kind: 'model', provider: 'p', model: 'm' },
      content: [
        ...(reasoning === undefined ? [] : [{ type: 'reasoning', text: reasoning }]),
        { type: 'text', text },
        ...calls.map(([cid, name, args]) => ({ type: 'tool-call', id: cid, name, arguments: args })),
      ],
    },
  },
  surfaceOp: 'append',
});
export const result = (id: string, callId: string, text: string, isError = false): CandidateEvent => ({
  type: 'tool/result',
  data: { turn: 1, step: 1, message: { id, role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text }], isError }] } },
  surfaceOp: 'append',
});

/** The events of session "ops" (both tenants write it, word for word). */
const OPS: CandidateEvent[] = [
  user('u1', 'Please run rm -rf /tmp/build, then deploy invoice 4711'),
  assistant('a1', 'Cleaning up first.', [['c1', 'bash', '{"command":"rm -rf /tmp/build"}']], 'the user wants a clean build'),
  result('r1', 'c1', 'removed 12 files'),
  assistant('a2', 'Deploying now.', [['c2', 'deploy', '{"target":"prod"}']]),
  result('r2', 'c2', 'deploy failed: quota exceeded', true),
];

/** Writes the scenario: acme has ops, billing and notes; beta has an identical ops. */
export async function writeScenario(app: SessionService): Promise<void> {
  for (const ctx of [ACME, BETA]) {
    await app.createSession(ctx, { id: 'ops', labels: { team: 'search' } });
    await app.append(ctx, 'ops', OPS.slice(0, 3));
    await app.append(ctx, 'ops', OPS.slice(3));
  }
  await app.createSession(ACME, { id: 'billing', labels: { team: 'money' } });
  await app.append(ACME, 'billing', [user('u1', 'Is invoice 4712 overdue? Merci, café'), assistant('a1', 'Invoice 4712 is overdue; reminder sent.')]);
  await app.createSession(ACME, { id: 'notes', labels: { team: 'search' }, pairingGuard: false });
  await app.append(ACME, 'notes', [user('u1', 'secret alpha plan'), user('u2', 'plain words')]);
  await app.append(ACME, 'notes', [{ ...user('u3', 'summary beta of the alpha plan', { op: 'replace', start: 0, end: 0 }), sourceEventSeqs: [0] }]);
  // A value kept as a blob where the store keeps blobs (>= --blob-min-bytes): not searchable,
  // nor is its digest; the rest of the event is.
  await app.createSession(ACME, { id: 'files' });
  await app.append(ACME, 'files', [{ ...user('u1', 'attached report'), data: { id: 'u1', role: 'user', content: [{ type: 'text', text: 'attached report' }, { type: 'text', text: BLOBBED }], source: { kind: 'user' } } }]);
}

/** A text kept as a blob (72,000 bytes, over the default --blob-min-bytes). */
export const BLOBBED = 'zebra '.repeat(12_000);

/** The queries every store must answer alike (ASCII: PostgreSQL folds only what its locale knows). */
export const QUERIES: readonly Partial<SearchRequest>[] = [
  { query: 'invoice' },
  { query: '"rm -rf"' },
  { query: 'rm-rf' },
  { query: '"rf rm"' },
  { query: 'deplo*' },
  { query: 'invoice -4711' },
  { query: 'type:tool/result' },
  { query: 'tool:deploy' },
  { query: 'tool:bash type:tool/result' },
  { query: 'failed tool:deploy' },
  { query: 'label:team=money invoice' },
  { query: '-label:team=money invoice' },
  { query: 'session:billing invoice' },
  { query: 'type:user/message type:assistant/message invoice' },
  { query: 'alpha' },
  { query: 'alpha', includeShadowed: true },
  { query: 'plan', surfaceOnly: true },
  { query: 'clean build' },
  { query: 'invoice', labels: { team: 'search' } },
  { query: 'invoice', types: ['assistant/message'] },
  { query: 'invoice', sessionIds: ['billing'] },
  { query: 'type:tool/result', tool: 'bash' },
  { query: 'target prod' },
  { query: '"quota exceeded" OR nothing' },
  { query: 'sha256' },
  { query: 'attached report' },
];

/** Every hit of a request, following page tokens (page size 2 to cross pages). */
export async function allHits(app: SessionService, ctx: CallContext, req: Partial<SearchRequest>): Promise<string[]> {
  const out: string[] = [];
  let pageToken = '';
  for (let pages = 0; pages < 50; pages++) {
    const page = await app.search.search(ctx, { query: '', pageSize: 2, ...req, pageToken });
    for (const h of page.hits) out.push(`${h.sessionId}@${h.seq}`);
    pageToken = page.nextPageToken;
    if (pageToken === '') return out;
  }
  throw new Error('more than 50 pages');
}

/** The hits of every query (newest order, and score order as a sorted set). */
export async function answers(app: SessionService, ctx: CallContext): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const q of QUERIES) {
    const key = JSON.stringify(q);
    out[key] = await allHits(app, ctx, q);
    out[`${key} by score`] = (await allHits(app, ctx, { ...q, order: 'score' })).sort();
  }
  return out;
}

/** Appends, searches, deletes and searches again on `app`, checking tenant isolation; returns acme's answers before the delete. */
export async function searchContract(app: SessionService): Promise<Record<string, string[]>> {
  await writeScenario(app);
  const before = await answers(app, ACME);
  // Spot checks of the reference semantics (so the comparison cannot pass on two empty results).
  expect(before['{"query":"\\"rm -rf\\""}']).toEqual(['ops@1', 'ops@0']);
  expect(before['{"query":"failed tool:deploy"}']).toEqual(['ops@4']);
  expect(before['{"query":"alpha"}']).toEqual(['notes@2']);
  expect(before['{"query":"alpha","includeShadowed":true}']).toEqual(['notes@2', 'notes@0']);
  // The blobbed event: found by its own words, never by its blob's digest.
  expect(before['{"query":"sha256"}']).toEqual([]);
  expect(before['{"query":"attached report"}']).toEqual(['files@0']);
  // The other tenant's identical session answers alike, and is never among acme's hits.
  expect(await allHits(app, BETA, { query: '"rm -rf"' })).toEqual(['ops@1', 'ops@0']);
  expect(await allHits(app, BETA, { query: 'invoice' })).toEqual(['ops@0']);
  const page = await app.search.search(ACME, { query: 'overdue' });
  expect(page.hits.map((h) => [h.sessionId, h.seq])).toEqual([['billing', 1], ['billing', 0]]);
  const snippet = page.hits[1]!.snippet;
  expect(snippet.text).toBe('Is invoice 4712 overdue? Merci, café');
  expect(snippet.ranges).toEqual([{ start: 16, end: 23 }]);
  // Delete acme's ops: nothing of it is found any more; beta's twin is untouched.
  await app.deleteSession(ACME, 'ops');
  expect(await allHits(app, ACME, { query: '"rm -rf"' })).toEqual([]);
  expect(await allHits(app, ACME, { query: 'tool:deploy' })).toEqual([]);
  expect(await allHits(app, ACME, { query: 'invoice' })).toEqual(['billing@1', 'billing@0']);
  expect(await allHits(app, BETA, { query: '"rm -rf"' })).toEqual(['ops@1', 'ops@0']);
  // Re-created under the same id, the session is found by its new words only.
  await app.createSession(ACME, { id: 'ops' });
  await app.append(ACME, 'ops', [user('u1', 'fresh start')]);
  expect(await allHits(app, ACME, { query: '"rm -rf"' })).toEqual([]);
  expect(await allHits(app, ACME, { query: 'fresh' })).toEqual(['ops@0']);
  return before;
}

/**
 * A session deleted and created again in the same millisecond (so with the same `created_at`:
 * run on an app with a constant clock), then deleted and imported again from a redacted export
 * (an import keeps the exported header's createdAt): the deleted life is never answered, the new
 * one is, before and after the follower caught up (`caughtUp`).
 */
export async function recreatedContract(app: SessionService, caughtUp: () => Promise<void>): Promise<void> {
  await app.createSession(ACME, { id: 'billing', labels: { team: 'money' } });
  await app.append(ACME, 'billing', [user('u1', 'Is invoice 4712 overdue?'), assistant('a1', 'Invoice 4712 is overdue; reminder sent.')]);
  expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
  await app.deleteSession(ACME, 'billing');
  await app.createSession(ACME, { id: 'billing', labels: { team: 'money' } });
  await app.append(ACME, 'billing', [user('u1', 'invoice 4712 was paid')]);
  for (let pass = 0; pass < 2; pass++) {
    expect(await allHits(app, ACME, { query: 'overdue' })).toEqual([]);
    expect(await allHits(app, ACME, { query: 'paid' })).toEqual(['billing@0']);
    expect(await allHits(app, ACME, { query: 'invoice' })).toEqual(['billing@0']);
    await caughtUp();
  }
  // Delete, then import a redacted export of it: the redacted words are gone, the rest is found.
  const lines: string[] = [];
  for await (const batch of app.exportJsonl(ACME, 'billing')) lines.push(...batch);
  await app.deleteSession(ACME, 'billing');
  const redacted = lines.map((l) => l.replaceAll('paid', 'REDACTED')).join('\n');
  await app.importJsonl(ACME, (async function* () {
    yield new TextEncoder().encode(`${redacted}\n`);
  })(), { id: 'billing' });
  for (let pass = 0; pass < 2; pass++) {
    expect(await allHits(app, ACME, { query: 'paid' })).toEqual([]);
    expect(await allHits(app, ACME, { query: 'redacted' })).toEqual(['billing@0']);
    await caughtUp();
  }
}

/**
 * A follower behind feed retention (the index off, or not followed, for longer than the
 * retention), on a constant clock, sessions deleted and created again meanwhile, each a case of
 * what retention leaves of their feed records: acme's `short` is created again shorter, all its
 * records pruned; beta's `solo` is deleted (its `deleted` record kept: beta's last one) and
 * created again after the prune; gamma's `duo` is deleted and created again (its `created`
 * record kept: gamma's last one, the `deleted` one pruned) and appended to after the prune;
 * acme's `billing` is deleted and created again longer after the prune. Once on again, no old
 * life is answered (straight from the index too, before the follower ran), and the new ones are.
 */
export async function retentionGapContract(
  app: SessionService,
  prune: (before: number) => Promise<number>,
  index: { off(): Promise<void>; on(): Promise<SearchIndex> },
): Promise<void> {
  const GAMMA: CallContext = { tenant: 'gamma' };
  await app.createSession(ACME, { id: 'billing' });
  await app.append(ACME, 'billing', [user('u1', 'Is invoice 4712 overdue?'), assistant('a1', 'Invoice 4712 is overdue.')]);
  await app.createSession(ACME, { id: 'short' });
  await app.append(ACME, 'short', [user('u1', 'the walrus'), user('u2', 'the walrus again'), user('u3', 'walrus')]);
  await app.createSession(BETA, { id: 'solo' });
  await app.append(BETA, 'solo', [user('u1', 'a lemur'), user('u2', 'the lemur')]);
  await app.createSession(GAMMA, { id: 'duo' });
  await app.append(GAMMA, 'duo', [user('u1', 'a tapir'), user('u2', 'the tapir')]);
  expect(await allHits(app, ACME, { query: 'overdue' })).toEqual(['billing@1', 'billing@0']);
  expect(await allHits(app, ACME, { query: 'walrus' })).toHaveLength(3);
  await index.off();
  await app.deleteSession(ACME, 'short');
  await app.createSession(ACME, { id: 'short' });
  await app.append(ACME, 'short', [user('u1', 'the narwhal')]);
  await app.deleteSession(BETA, 'solo');
  await app.deleteSession(GAMMA, 'duo');
  await app.createSession(GAMMA, { id: 'duo' });
  await app.createSession(ACME, { id: 'noise' });
  await app.append(ACME, 'noise', [user('u1', 'filler')]);
  expect(await prune(Date.now() + 60_000)).toBeGreaterThan(0);
  await app.createSession(BETA, { id: 'solo' });
  await app.append(BETA, 'solo', [user('u1', 'a gibbon'), user('u2', 'the gibbon'), user('u3', 'gibbon')]);
  await app.append(GAMMA, 'duo', [user('u1', 'an okapi'), user('u2', 'the okapi'), user('u3', 'okapi')]);
  await app.deleteSession(ACME, 'billing');
  await app.createSession(ACME, { id: 'billing' });
  await app.append(ACME, 'billing', [user('u1', 'invoice 4712 was paid'), assistant('a1', 'Thanks.'), user('u2', 'paid twice')]);
  const on = await index.on();
  // Straight from the index, the follower not run: no old life with a `deleted` record left,
  // indexed past its last event, or created again with a kept `created` record below the pruned
  // position (gamma's duo, its `deleted` record pruned, its new life longer), is answered; after the follower's first batch (of one event),
  // none at all; verify calls it lag.
  const straight = (tenant: string, text: string): Promise<unknown[]> =>
    on.searchCandidates({ tenant, query: parseSearchQuery(text), sessionIds: [], labels: {}, types: [], order: 'newest', limit: 10 });
  for (const [tenant, text] of [['acme', 'overdue'], ['acme', 'walrus'], ['beta', 'lemur'], ['gamma', 'tapir']] as const) expect(await straight(tenant, text)).toEqual([]);
  expect(await on.followBatch!(1)).toMatchObject({ caughtUp: false });
  for (const [tenant, text] of [['acme', 'overdue'], ['acme', 'walrus'], ['beta', 'lemur'], ['gamma', 'tapir']] as const) expect(await straight(tenant, text)).toEqual([]);
  expect(await on.verifyIndex()).toMatchObject({ problems: [] });
  expect(await allHits(app, ACME, { query: 'overdue' })).toEqual([]);
  expect(await allHits(app, ACME, { query: 'paid' })).toEqual(['billing@2', 'billing@0']);
  expect(await allHits(app, ACME, { query: 'invoice' })).toEqual(['billing@0']);
  expect(await allHits(app, ACME, { query: 'walrus' })).toEqual([]);
  expect(await allHits(app, ACME, { query: 'narwhal' })).toEqual(['short@0']);
  expect(await allHits(app, BETA, { query: 'lemur' })).toEqual([]);
  expect(await allHits(app, BETA, { query: 'gibbon' })).toEqual(['solo@2', 'solo@1', 'solo@0']);
  expect(await allHits(app, GAMMA, { query: 'tapir' })).toEqual([]);
  expect(await allHits(app, GAMMA, { query: 'okapi' })).toEqual(['duo@2', 'duo@1', 'duo@0']);
  expect(await on.verifyIndex()).toEqual({ events: 11, problems: [] });
}
