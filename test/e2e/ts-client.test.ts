/**
 * The TypeScript client `@palimpsest/client` (clients/typescript, issues #18/#38) against a real server: typed
 * event builders that produce what the engine accepts, decoded errors (each rejection leaving the
 * log untouched), idempotent appends, UNAVAILABLE retries from the service config, and a surface
 * subscription that resumes by itself after dropped connections; the retry pattern (derived message
 * ids), and the session RPCs (listSessions, fork, repair, exportSession, importSession).
 * test/e2e/ts-client-package.test.ts installs the packed package.
 */
import { InterceptingCall, type InterceptorOptions, type NextCall } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PalimpsestClient, PalimpsestError, events as ev, type SurfaceDelta } from '../../clients/typescript/src/index.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const json = (e: { data?: { kind?: { $case: string; value: unknown } } | undefined }): unknown =>
  e.data?.kind?.$case === 'json' ? JSON.parse(e.data.kind.value as string) : undefined;

async function rejection(p: Promise<unknown>): Promise<PalimpsestError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(PalimpsestError);
    return e as PalimpsestError;
  }
  throw new Error('expected the call to fail');
}

/** Next delta that is not a signal. */
async function next(it: AsyncIterator<SurfaceDelta>, op: SurfaceDelta['op']): Promise<SurfaceDelta> {
  for (;;) {
    const r = await it.next();
    if (r.done) throw new Error('subscription ended');
    if (r.value.op === 'heartbeat' || r.value.op === 'caught_up' || r.value.op === 'checkpoint') continue;
    expect(r.value.op).toBe(op);
    return r.value;
  }
}

describe('@palimpsest/client (TypeScript)', () => {
  let ts: TestServer;
  let c: PalimpsestClient;
  let n = 0;
  const sid = (): string => `ts-${++n}`;
  beforeAll(async () => {
    ts = await startTestServer();
    c = new PalimpsestClient(ts.server.address);
  });
  afterAll(async () => {
    c?.close();
    await ts?.stop();
  });

  it('a turn built with the event builders is accepted and derives the expected messages', async () => {
    const id = sid();
    expect((await c.createSession(id, { labels: { client: 'ts' } })).labels).toEqual({ client: 'ts' });
    const chunks = ev.textChunks(1, 1, 'Let me look.', { parts: 2 });
    const batch = [ev.turnStart(1), ev.stepStart(1, 1), ev.userMessage('What is here?', { id: 'u1' }), ...chunks];
    batch.push(ev.assistantMessage('Let me look.', {
      turn: 1, step: 1, provider: 'p', model: 'm', id: 'a1', toolCalls: [{ id: 'c1', name: 'ls', arguments: '{}' }],
      usage: { inputTokens: 10, outputTokens: 3 }, cites: [3, 4, 5, 6],
    }));
    const callSeq = batch.length;
    batch.push(ev.toolCall('c1', 'ls', '{}', { turn: 1, step: 1 }));
    batch.push(ev.toolResult('c1', 'README.md', { turn: 1, step: 1, id: 'r1', callSeq }), ev.stepEnd(1, 1), ev.turnEnd(1));
    expect(await c.append(id, batch, { expectedLastSeq: -1 })).toEqual(batch.map((_, i) => i));
    expect(await c.getSurface(id)).toEqual([2, 7, 9]);
    expect(await c.messages(id)).toEqual([
      { id: 'u1', role: 'user', content: [{ type: 'text', text: 'What is here?' }], source: { kind: 'user' } },
      { id: 'a1', role: 'assistant', source: { kind: 'model', provider: 'p', model: 'm' },
        content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool-call', id: 'c1', name: 'ls', arguments: '{}' }] },
      { id: 'r1', role: 'user', source: { kind: 'tool', callId: 'c1' },
        content: [{ type: 'tool-result', toolCallId: 'c1', content: [{ type: 'text', text: 'README.md' }] }] },
    ]);
    const events = [];
    for await (const e of c.events(id)) events.push(e);
    expect(json(events[3]!)).toEqual({ turn: 1, step: 1, chunk: { type: 'block-start', index: 0, blockType: 'text' } });
    expect(events[9]!.sourceEventSeqs?.seqs).toEqual([8]);
    expect(json(events[11]!)).toEqual({ turn: 1, reason: { kind: 'completed' } });
    // A prune keeps the id and replaces the original.
    await c.append(id, [ev.event('compaction/prune', { shadowedRange: { start: 9, end: 9 }, shadowedSeqs: [9], shadowedTokenCount: 2 }),
      ev.toolResult('c1', '[pruned]', { turn: 1, step: 1, id: 'r1', replace: [9, 9], cites: [9] })]);
    expect(await c.getSurface(id)).toEqual([2, 7, 13]);
    expect((await c.messages(id, { transcript: true })).length).toBe(3);
  });

  it('HEAD_MISMATCH is decoded and leaves the log untouched; the right head is accepted', async () => {
    const id = sid();
    await c.createSession(id);
    await c.append(id, [ev.userMessage('one')], { expectedLastSeq: -1 });
    const e = await rejection(c.append(id, [ev.userMessage('two')], { expectedLastSeq: -1 }));
    expect(e).toMatchObject({ code: 'FAILED_PRECONDITION', reason: 'HEAD_MISMATCH', metadata: { expected: '-1', actual: '0' } });
    expect(e.violations).toEqual([expect.objectContaining({ kind: 'precondition', type: 'HEAD_MISMATCH' })]);
    expect(e.toJSON()).toMatchObject({ code: 'FAILED_PRECONDITION', reason: 'HEAD_MISMATCH' });
    expect(await c.head(id)).toBe(0);
    expect(await c.append(id, [ev.userMessage('two')], { expectedLastSeq: 0 })).toEqual([1]);
  });

  it('appendStream: pipelined batches land in order with their seqs; a refused batch fails alone; close waits', async () => {
    const id = sid();
    const other = sid();
    await c.createSession(id);
    await c.createSession(other);
    const w = c.appendStream();
    const batches = Array.from({ length: 40 }, (_, i) => w.append(i % 2 ? other : id, [ev.userMessage(`m${i}`), ev.userMessage(`r${i}`)]));
    // HEAD_MISMATCH: written after 20 batches of `id` (head 39), guarded on -1.
    const refused = rejection(w.append(id, [ev.userMessage('late')], { expectedLastSeq: -1 }));
    const after = w.append(id, [ev.userMessage('next')], { expectedLastSeq: 39 });
    const tail = Array.from({ length: 10 }, (_, i) => w.append(other, [ev.userMessage(`t${i}`)]));
    let settled = 0;
    for (const p of [...batches, after, ...tail]) void p.then(() => settled++);
    expect(w.outstanding).toBe(52);
    await w.close();
    expect(w.outstanding).toBe(0);
    expect(settled).toBe(51);
    const seqs = await Promise.all(batches);
    for (let i = 0; i < 40; i++) {
      const k = Math.floor(i / 2) * 2;
      expect(seqs[i]).toEqual([k, k + 1]);
    }
    const e = await refused;
    expect(e).toMatchObject({ code: 'FAILED_PRECONDITION', reason: 'HEAD_MISMATCH', metadata: { expected: '-1', actual: '39' } });
    expect(e.violations).toEqual([expect.objectContaining({ kind: 'precondition', type: 'HEAD_MISMATCH' })]);
    expect(await after).toEqual([40]);
    expect(await Promise.all(tail)).toEqual(Array.from({ length: 10 }, (_, i) => [40 + i]));
    expect(await c.head(id)).toBe(40);
    expect(await c.head(other)).toBe(49);
    expect(await rejection(w.append(id, [ev.userMessage('closed')]))).toMatchObject({ code: 'FAILED_PRECONDITION' });
  });

  it('appendStream: a broken stream rejects every outstanding batch', async () => {
    const id = sid();
    await c.createSession(id);
    const w = c.appendStream();
    const pending = Array.from({ length: 20 }, (_, i) => rejection(w.append(id, [ev.userMessage(`m${i}`)])));
    w.cancel();
    for (const e of await Promise.all(pending)) expect(e.code).toBe('CANCELLED');
    await w.close();
    expect(w.outstanding).toBe(0);
  });

  it('appendStream derives message ids from the idempotency key as append does: a repeat is answered from the stored result', async () => {
    const id = sid();
    await c.createSession(id);
    const w = c.appendStream();
    const first = await w.append(id, [ev.userMessage('once')], { idempotencyKey: 'stream-k1' });
    const again = await w.append(id, [ev.userMessage('once')], { idempotencyKey: 'stream-k1' });
    await w.close();
    expect(again).toEqual(first);
    expect(await c.append(id, [ev.userMessage('once')], { idempotencyKey: 'stream-k1' })).toEqual(first);
    expect(await c.head(id)).toBe(0);
  });

  it('a bad batch names the failing event; nothing is appended', async () => {
    const id = sid();
    await c.createSession(id);
    const e = await rejection(c.append(id, [ev.userMessage('ok'), ev.event('turn/start', { turn: 1 }, { append: true })]));
    expect(e).toMatchObject({ code: 'INVALID_ARGUMENT', reason: 'SURFACE_OP_FORBIDDEN', metadata: { index: '1' } });
    expect(e.violations).toEqual([expect.objectContaining({ kind: 'field', field: 'events[1]' })]);
    expect(await c.head(id)).toBe(-1);
    expect(await c.append(id, [ev.userMessage('ok'), ev.turnStart(1)])).toEqual([0, 1]);
    expect((await rejection(c.getSurface('ts-none'))).reason).toBe('SESSION_NOT_FOUND');
  });

  it('every append carries an idempotency key; a repeated request is answered from the stored result', async () => {
    const keys: string[] = [];
    const recorder = (options: InterceptorOptions, nextCall: NextCall): InterceptingCall => new InterceptingCall(nextCall(options), {
      sendMessage(m: { idempotencyKey?: unknown }, send: (m: unknown) => void) {
        if (typeof m.idempotencyKey === 'string') keys.push(m.idempotencyKey);
        send(m);
      },
    });
    const rc = new PalimpsestClient(ts.server.address, { interceptors: [recorder] });
    const id = sid();
    await rc.createSession(id);
    await rc.append(id, [ev.userMessage('a')]);
    await rc.append(id, [ev.userMessage('b')]);
    expect(keys.length).toBe(2);
    expect(keys[0]).not.toBe(keys[1]);
    const batch = [ev.userMessage('c')];
    expect(await rc.append(id, batch, { idempotencyKey: 'k' })).toEqual([2]);
    expect(await rc.append(id, batch, { idempotencyKey: 'k' })).toEqual([2]);
    expect(keys.slice(2)).toEqual(['k', 'k']);
    expect(await rc.head(id)).toBe(2);
    expect((await rejection(rc.append(id, [ev.userMessage('d')], { idempotencyKey: 'k' }))).reason).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await rc.head(id)).toBe(2);
    rc.close();
  });

  it('UNAVAILABLE is retried by the service config (and reaches the caller with retries off)', async () => {
    const proxy = await TcpProxy.start(ts.server.address);
    const fast = { 'grpc.initial_reconnect_backoff_ms': 50, 'grpc.min_reconnect_backoff_ms': 50, 'grpc.max_reconnect_backoff_ms': 200 };
    try {
      const rc = new PalimpsestClient(proxy.address, { channelOptions: fast });
      proxy.refuse = 1;
      const id = sid();
      await rc.createSession(id);
      expect(proxy.accepted).toBeGreaterThanOrEqual(2);
      rc.close();
      const plain = new PalimpsestClient(proxy.address, { retries: false, channelOptions: fast });
      proxy.refuse = 1;
      expect((await rejection(plain.getSurface(id))).code).toBe('UNAVAILABLE');
      plain.close();
    } finally {
      await proxy.close();
    }
  });

  it('subscribeSurface resumes after dropped connections with no gap or duplicate', async () => {
    const id = sid();
    await c.createSession(id);
    await c.append(id, [ev.userMessage('before')]);
    const proxy = await TcpProxy.start(ts.server.address);
    const sub = new PalimpsestClient(proxy.address);
    try {
      const it = sub.subscribeSurface(id, { includeMessages: true })[Symbol.asyncIterator]();
      const first = await next(it, 'append');
      expect(first).toMatchObject({ op: 'append', seq: 0, cursor: 0, message: { content: [{ type: 'text', text: 'before' }] } });
      const seen: number[] = [];
      for (let round = 0; round < 3; round++) {
        const seqs = await c.append(id, [0, 1, 2].map((i) => ev.userMessage(`r${round}-${i}`)));
        for (const s of seqs) {
          const d = await next(it, 'append');
          expect(d).toMatchObject({ seq: s, cursor: s });
          seen.push(s);
        }
        expect(proxy.drop()).toBeGreaterThan(0);
      }
      const head = await c.head(id);
      await c.append(id, [ev.userMessage('summary', { source: { kind: 'plugin', plugin: 'compact' }, replace: [0, 3], cites: [0, 1, 2, 3] })]);
      expect(await next(it, 'replace')).toMatchObject({ seq: head + 1, start: 0, end: 3, shadowed: [0, 1, 2, 3] });
      await it.return?.(undefined);
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect(proxy.accepted).toBeGreaterThanOrEqual(4);
    } finally {
      sub.close();
      await proxy.close();
    }
  });

  it('subscribeSurface with reconnect: false ends with UNAVAILABLE; a deleted session ends it with NOT_FOUND', async () => {
    const id = sid();
    await c.createSession(id);
    const proxy = await TcpProxy.start(ts.server.address);
    const sub = new PalimpsestClient(proxy.address);
    try {
      const it = sub.subscribeSurface(id, { reconnect: false })[Symbol.asyncIterator]();
      expect((await it.next()).value).toMatchObject({ op: 'caught_up' });
      proxy.drop();
      expect((await rejection(next(it, 'append'))).code).toBe('UNAVAILABLE');
    } finally {
      sub.close();
      await proxy.close();
    }
    const it2 = c.subscribeSurface(id, { snapshot: true })[Symbol.asyncIterator]();
    expect((await it2.next()).value).toEqual({ op: 'snapshot', cursor: undefined, seqs: [] });
    expect((await it2.next()).value).toMatchObject({ op: 'caught_up' });
    await c.deleteSession(id);
    expect(await rejection(next(it2, 'append'))).toMatchObject({ code: 'NOT_FOUND', reason: 'SESSION_NOT_FOUND' });
  });

  it('an aborted signal ends the iteration quietly', async () => {
    const id = sid();
    await c.createSession(id);
    const ac = new AbortController();
    const got: string[] = [];
    for await (const d of c.subscribeSurface(id, { signal: ac.signal })) {
      got.push(d.op);
      if (d.op === 'caught_up') ac.abort();
    }
    expect(got).toEqual(['caught_up']);
  });


  it('a retry rebuilds its batch with the same key: the derived message ids make it the same batch', async () => {
    const id = sid();
    await c.createSession(id);
    const batch = (answer: string) => [
      ev.turnStart(1), ev.userMessage('What is here?'),
      ev.assistantMessage(answer, { turn: 1, step: 1, provider: 'p', model: 'm' }),
      ev.userMessage('explicit', { id: 'mine' }), ev.turnEnd(1),
    ];
    const key = `retry-${id}`;
    const first = await c.append(id, batch('README.md'), { idempotencyKey: key, expectedLastSeq: -1 });
    const again = await c.append(id, batch('README.md'), { idempotencyKey: key, expectedLastSeq: -1 });
    expect(again).toEqual(first);
    expect(first).toEqual([0, 1, 2, 3, 4]);
    expect(await c.head(id)).toBe(4);
    expect((await c.messages(id)).map((m) => m.id)).toEqual([ev.derivedId('u', key, 1), ev.derivedId('a', key, 2), 'mine']);
    // The same derivation as the Go and Python clients (sha256 of "key/index", 24 hex digits).
    expect(ev.derivedId('u', 'k', 0)).toBe('u-7306c07d1e16ba09572c2397');
    // Another batch under the same key is still refused and leaves the log as it was.
    const e = await rejection(c.append(id, batch('src/'), { idempotencyKey: key }));
    expect(e.reason).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await c.head(id)).toBe(4);
  });

  it('listSessions pages, fork, repair, exportSession and importSession (streamed)', async () => {
    const id = sid();
    const labels = { suite: `parity-${id}` };
    await c.createSession(id, { labels });
    await c.append(id, [ev.turnStart(1), ev.userMessage('hi', { id: 'u1' })]);
    const closers = await c.repair(id);
    expect(closers.at(-1)?.type).toBe('turn/end');
    expect(await c.repair(id)).toEqual([]);
    const head = await c.head(id);
    const child = await c.fork(id, { childSessionId: `${id}-child`, labels });
    expect([child.id, child.parentSession, child.seedLength]).toEqual([`${id}-child`, id, head + 1]);
    await c.createSession(`${id}-third`, { labels });
    const listed: string[] = [];
    for await (const s of c.listSessions({ labels, pageSize: 1 })) listed.push(s.id);
    expect(listed.sort()).toEqual([id, `${id}-child`, `${id}-third`]);

    const chunks: Uint8Array[] = [];
    for await (const chunk of c.exportSession(id)) chunks.push(chunk);
    const file = Buffer.concat(chunks);
    // The header, the events, and the session's labels in a last ignorable metadata line (issue #35).
    const lines = file.toString().split('\n').filter(Boolean);
    expect(lines).toHaveLength(head + 3);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ type: 'palimpsest/session-metadata', ignorable: true });
    // Imported from chunks of 7 bytes: the stream is reassembled by the server.
    const parts = Array.from({ length: Math.ceil(file.length / 7) }, (_, i) => file.subarray(i * 7, i * 7 + 7));
    const res = await c.importSession(parts, { sessionId: `${id}-copy` });
    expect([res.session?.id, res.session?.headSeq, res.uncommittedTailBytes]).toEqual([`${id}-copy`, head, 0]);
    expect(await c.getSurface(`${id}-copy`)).toEqual(await c.getSurface(id));
    // A second import under the same id is refused and leaves the copy as it was.
    expect((await rejection(c.importSession(file, { sessionId: `${id}-copy` }))).reason).toBe('SESSION_ALREADY_EXISTS');
    expect(await c.head(`${id}-copy`)).toBe(head);
    // A file without a header is refused and leaves no session behind.
    expect((await rejection(c.importSession('not json\n', { sessionId: `${id}-bad` }))).reason).toBe('HEADER_INVALID');
    expect((await rejection(c.getSession(`${id}-bad`))).reason).toBe('SESSION_NOT_FOUND');
    expect((await rejection((async () => { for await (const _ of c.exportSession(`${id}-bad`)) { /* none */ } })())).reason).toBe('SESSION_NOT_FOUND');
  });
});
