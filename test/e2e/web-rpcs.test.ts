/**
 * The web port (src/server/web) through @connectrpc/connect clients, Connect and gRPC-Web: every
 * RPC's happy path, a sample of errors with their google.rpc details (the same as on the gRPC
 * port), a server stream resuming from a cursor, and limits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Code, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Health, HealthCheckResponse_ServingStatus } from '../../gen/es/grpc/health/v1/health_pb.js';
import { Metadata } from '@grpc/grpc-js';
import { startTestServer, callError, type TestServer } from '../support/test-server.js';
import { userMessage } from '../support/events.js';
import { DEMO, demoBatches } from '../support/demo-session.js';
import { esEvent, webClient, webFailure, WEB_PROTOCOLS } from '../support/web-client.js';
import { fixture, until } from '../support/e2e.js';
import { DataFormat, Direction, MessageView } from '../../gen/es/palimpsest/v1/service_pb.js';

let t: TestServer;
let base: string;
beforeAll(async () => {
  t = await startTestServer({ webListen: '127.0.0.1:0', limits: { maxBatchEvents: 5 } as never });
  base = `http://127.0.0.1:${t.server.webPort}`;
});
afterAll(async () => {
  await t.stop();
});

describe.each(WEB_PROTOCOLS)('web port over $protocol (HTTP/$httpVersion, json: $json)', ({ protocol, httpVersion, json }) => {
  const via = `${protocol}${json ? '-json' : ''}`;
  const id = `demo-${via}`;
  const c = () => webClient(base, protocol, httpVersion, undefined, undefined, json);

  it('CreateSession, AppendEvents, GetSession, ListSessions (label filter, newest first)', async () => {
    const created = await c().createSession({ sessionId: id, labels: { via, kind: 'demo' } });
    expect(created.session?.id).toBe(id);
    const seqs: bigint[] = [];
    for (const batch of demoBatches()) {
      const r = await c().appendEvents({ sessionId: id, events: batch.map(esEvent), expectedLastSeq: seqs.length === 0 ? -1n : seqs[seqs.length - 1] });
      seqs.push(...r.seqs);
    }
    expect(seqs.map(Number)).toEqual([...Array(DEMO.head + 1).keys()]);
    const got = await c().getSession({ sessionId: id });
    expect(got.session).toMatchObject({ id, eventCount: BigInt(DEMO.head + 1), surfaceLength: BigInt(DEMO.surface.length), headSeq: BigInt(DEMO.head), labels: { via, kind: 'demo' } });
    await c().createSession({ sessionId: `${id}-newer`, labels: { via } });
    const list = await c().listSessions({ labelSelector: { via } });
    expect(list.sessions.map((s) => s.id)).toEqual([`${id}-newer`, id]);
    const page = await c().listSessions({ labelSelector: { via }, pageSize: 1 });
    expect(page.sessions.map((s) => s.id)).toEqual([`${id}-newer`]);
    const rest = await c().listSessions({ labelSelector: { via }, pageSize: 1, pageToken: page.nextPageToken });
    expect(rest.sessions.map((s) => s.id)).toEqual([id]);
  });

  it('ListEvents (both directions, typed data), GetSurface, GetMessages (both views, as_of_seq)', async () => {
    const fwd = await c().listEvents({ sessionId: id, direction: Direction.FORWARD, pageSize: 5 });
    expect(fwd.events.map((e) => Number(e.seq))).toEqual([0, 1, 2, 3, 4]);
    const next = await c().listEvents({ sessionId: id, pageToken: fwd.nextPageToken });
    expect(Number(next.events[0]?.seq)).toBe(5);
    const back = await c().listEvents({ sessionId: id, direction: Direction.BACKWARD, pageSize: 2, dataFormat: DataFormat.TYPED });
    expect(back.events.map((e) => Number(e.seq))).toEqual([DEMO.head, DEMO.head - 1]);
    expect(back.events[0]?.data?.kind.case).toBe('assistantMessage');
    const s = await c().getSurface({ sessionId: id });
    expect(s.seqs.map(Number)).toEqual([...DEMO.surface]);
    const before = await c().getSurface({ sessionId: id, asOfSeq: BigInt(DEMO.compactionReplacement - 1) });
    expect(before.seqs.map(Number)).toEqual([0, 1, 2, 3, 4, 5]);
    const m = await c().getMessages({ sessionId: id, view: MessageView.MODEL_HISTORY });
    expect(m.messages.map((x) => Number(x.seq))).toEqual([...DEMO.surface]);
    expect(JSON.parse(m.messages[0]!.messageJson).id).toBe('k1');
    const old = await c().getMessages({ sessionId: id, view: MessageView.MODEL_HISTORY, asOfSeq: 3n, typed: true });
    expect(old.messages.map((x) => Number(x.seq))).toEqual([0, 1, 2, 3]);
    expect(old.messages[0]?.message?.role).toBe('user');
    const trOld = await c().getMessages({ sessionId: id, view: MessageView.TRANSCRIPT, asOfSeq: 3n });
    expect(trOld.messages.map((x) => Number(x.seq))).toEqual([0, 1, 2, 3]);
    const tr = await c().getMessages({ sessionId: id, view: MessageView.TRANSCRIPT, pageSize: 2 });
    expect(tr.messages.map((x) => Number(x.seq))).toEqual([0, 1]);
    const tr2 = await c().getMessages({ sessionId: id, view: MessageView.TRANSCRIPT, pageToken: tr.nextPageToken });
    expect(tr2.messages.map((x) => Number(x.seq))[0]).toBe(2);
  });

  it('ForkSession, RepairSession, ExportSession (server stream), DeleteSession', async () => {
    const fork = await c().forkSession({ sessionId: id, atSeq: 5n, childSessionId: `${id}-fork` });
    expect(fork.session?.parentSession).toBe(id);
    const repaired = await c().repairSession({ sessionId: id });
    expect(repaired.events).toEqual([]);
    const chunks: Uint8Array[] = [];
    for await (const r of c().exportSession({ sessionId: id })) chunks.push(r.chunk);
    const lines = Buffer.concat(chunks).toString('utf8').trim().split('\n');
    // Header, events, and the metadata trailer (labels, pairing guard; issue #35).
    expect(lines).toHaveLength(DEMO.head + 3);
    expect(JSON.parse(lines[0]!).id).toBe(id);
    expect(JSON.parse(lines[lines.length - 1]!).type).toBe('palimpsest/session-metadata');
    await c().deleteSession({ sessionId: `${id}-fork` });
    expect((await webFailure(c().getSession({ sessionId: `${id}-fork` }))).reason).toBe('SESSION_NOT_FOUND');
  });

  it('ImportSession (client stream, HTTP/2)', async () => {
    const bytes = fixture('compaction-recovery.jsonl');
    async function* parts() {
      yield { part: { case: 'options' as const, value: { sessionId: `${id}-import`, labels: { imported: 'yes' } } } };
      for (let i = 0; i < bytes.length; i += 4096) yield { part: { case: 'chunk' as const, value: bytes.subarray(i, i + 4096) } };
    }
    const r = await webClient(base, protocol, '2', undefined, undefined, json).importSession(parts());
    expect(r.session?.id).toBe(`${id}-import`);
    const out: Uint8Array[] = [];
    for await (const x of c().exportSession({ sessionId: `${id}-import` })) out.push(x.chunk);
    // The same log under the new id: everything after the header line is byte-identical, then
    // the metadata trailer with the import's labels (issue #35).
    const body = (b: Buffer) => b.toString('utf8').slice(b.indexOf('\n') + 1);
    const exported = body(Buffer.concat(out));
    const trailerAt = exported.lastIndexOf('\n', exported.length - 2) + 1;
    expect(exported.slice(0, trailerAt)).toBe(body(bytes));
    expect(JSON.parse(exported.slice(trailerAt))).toMatchObject({ type: 'palimpsest/session-metadata', data: { labels: { imported: 'yes' } } });
  });

  it('SubscribeSurface and SubscribeEvents resume from a cursor and follow live appends', async () => {
    const ac = new AbortController();
    const seen: string[] = [];
    const stream = c().subscribeSurface({ sessionId: id, afterSeq: BigInt(DEMO.compactionReplacement), includeMessages: true }, { signal: ac.signal });
    let appended = false;
    try {
      for await (const r of stream) {
        seen.push(`${r.kind.case}:${r.cursor ?? ''}`);
        if (r.kind.case === 'caughtUp' && !appended) {
          appended = true;
          await c().appendEvents({ sessionId: id, events: [esEvent(userMessage('live', 'one more'))] });
        }
        if (r.kind.case === 'append' && r.kind.value.seq === BigInt(DEMO.head + 1)) {
          expect(JSON.parse(r.message!.messageJson).id).toBe('live');
          break;
        }
      }
    } finally {
      ac.abort();
    }
    // After seq 8 (9 and 12 are off-surface events, passed over): 10, 11, 13 replacing 11, 14.
    expect(seen).toEqual(['append:10', 'append:11', 'replace:13', 'append:14', 'caughtUp:14', `append:${DEMO.head + 1}`]);
    const events: number[] = [];
    const ac2 = new AbortController();
    try {
      for await (const r of c().subscribeEvents({ sessionId: id, afterSeq: BigInt(DEMO.head - 1) }, { signal: ac2.signal })) {
        if (r.kind.case === 'event') events.push(Number(r.kind.value.seq));
        if (r.kind.case === 'caughtUp') break;
      }
    } finally {
      // Leaving the loop does not cancel the call; the signal does.
      ac2.abort();
    }
    expect(events).toEqual([DEMO.head, DEMO.head + 1]);
  });

  it('SubscribeSessions with batch: the changes read together come in one `changes` message, each with its own position', async () => {
    const selector = { wfeed: via };
    for (const n of [1, 2, 3]) await c().createSession({ sessionId: `wfeed-${via}-${n}`, labels: selector });
    const kinds: string[] = [];
    const got: { id: string; position: bigint }[] = [];
    let last = 0n;
    const ac = new AbortController();
    try {
      for await (const r of c().subscribeSessions({ after: 0n, labelSelector: selector, batch: true }, { signal: ac.signal })) {
        kinds.push(r.kind.case ?? '');
        if (r.kind.case === 'changes') {
          for (const ch of r.kind.value.changes) got.push({ id: ch.sessionId, position: ch.position });
          last = r.position;
        }
        if (r.kind.case === 'caughtUp') break;
      }
    } finally {
      ac.abort();
    }
    expect(kinds).toEqual(['changes', 'caughtUp']);
    expect(got.map((g) => g.id)).toEqual([1, 2, 3].map((n) => `wfeed-${via}-${n}`));
    expect(got.map((g) => g.position)).toEqual([...got.map((g) => g.position)].sort((x, y) => (x < y ? -1 : 1)));
    expect(last).toBe(got[2]!.position);
  });

  it('errors carry the gRPC port\'s code, reason and google.rpc details', async () => {
    const nf = await webFailure(c().getSession({ sessionId: 'missing' }));
    expect(nf).toMatchObject({ code: Code.NotFound, reason: 'SESSION_NOT_FOUND', domain: 'palimpsest.dev', metadata: { sessionId: 'missing' } });
    const grpc = await callError(t.client.getSession.bind(t.client), { sessionId: 'missing' }, new Metadata());
    expect([grpc.code, grpc.message, grpc.reason, grpc.metadata]).toEqual([nf.code, nf.message, nf.reason, nf.metadata]);

    const head = await c().getSession({ sessionId: id });
    const stale = await webFailure(c().appendEvents({ sessionId: id, expectedLastSeq: 0n, events: [esEvent(userMessage('x', 'x'))] }));
    expect(stale).toMatchObject({ code: Code.FailedPrecondition, reason: 'HEAD_MISMATCH', preconditionFailure: 1 });
    const view = await webFailure(c().getMessages({ sessionId: id }));
    expect(view).toMatchObject({ code: Code.InvalidArgument, reason: 'VIEW_UNSPECIFIED', badRequest: 1 });
    const big = await webFailure(c().appendEvents({ sessionId: id, events: [1, 2, 3, 4, 5, 6].map((i) => esEvent(userMessage(`b${i}`, "x"))) }));
    expect(big).toMatchObject({ code: Code.ResourceExhausted, reason: 'BATCH_TOO_LARGE', quotaFailure: 1, metadata: { limit: "5", actual: "6" } });
    const asOf = await webFailure(c().getSurface({ sessionId: id, asOfSeq: 10_000n }));
    expect(asOf).toMatchObject({ code: Code.OutOfRange, reason: 'AS_OF_SEQ_AFTER_HEAD', metadata: { asOfSeq: '10000' } });
    const badCursor = await webFailure(c().subscribeSurface({ sessionId: id, afterSeq: 10_000n }));
    expect(badCursor).toMatchObject({ reason: 'CURSOR_OUT_OF_RANGE' });
    // None of the rejected calls changed the log.
    expect((await c().getSession({ sessionId: id })).session?.headSeq).toBe(head.session?.headSeq);
  });
});

describe('web port backpressure', () => {
  it('a subscriber that stops reading makes the subscription fall back to catch-up, then receives everything in order', async () => {
    const s = await startTestServer({ webListen: '127.0.0.1:0', subscriberBufferBytes: 1024 });
    const ac = new AbortController();
    try {
      const c = webClient(`http://127.0.0.1:${s.server.webPort}`, 'grpcweb', '2');
      await c.createSession({ sessionId: 'slow' });
      const it = c.subscribeSurface({ sessionId: 'slow', includeMessages: true }, { signal: ac.signal })[Symbol.asyncIterator]();
      expect((await it.next()).value?.kind.case).toBe('caughtUp');
      // Not reading: ~1 MiB of deltas fill the HTTP/2 window and the bridge's queue.
      const big = 'x'.repeat(4000);
      for (let i = 0; i < 25; i++) await c.appendEvents({ sessionId: 'slow', events: Array.from({ length: 10 }, (_, j) => esEvent(userMessage(`m${i}-${j}`, big))) });
      const active = [...(s.streams?.active ?? [])];
      await until(() => active[0]?.stats?.fallbacks ?? 0, 'a fallback to catch-up');
      expect(active[0]!.stats!.maxBufferedBytes).toBeLessThanOrEqual(1024);
      const seqs: number[] = [];
      let caughtUps = 0;
      while (seqs.length < 250) {
        const r = (await it.next()).value!;
        if (r.kind.case === 'append') seqs.push(Number(r.kind.value.seq));
        if (r.kind.case === 'caughtUp') caughtUps++;
      }
      expect(seqs).toEqual([...Array(250).keys()]);
      // The fallback ends with another caught_up once the reader is level again.
      while (caughtUps === 0) if ((await it.next()).value!.kind.case === 'caughtUp') caughtUps++;
      expect(caughtUps).toBeGreaterThan(0);
    } finally {
      ac.abort();
      await s.stop();
    }
  }, 60_000);
});

describe('web port hostile input', () => {
  const url = (m: string) => `${base}/palimpsest.v1.SessionService/${m}`;
  const frame = (b: number[]) => Buffer.from([0, 0, 0, 0, b.length, ...b]);

  it('answers bytes that are not a protobuf message with INVALID_ARGUMENT and details, on every protocol, and stays up', async () => {
    const garbage = [0xff, 0xff, 0xff];
    // Connect unary: a JSON error body.
    const unary = await fetch(url('GetSession'), { method: 'POST', headers: { 'content-type': 'application/proto' }, body: Buffer.from(garbage) });
    expect(unary.status).toBe(400);
    const err = await unary.json() as { code: string; message: string; details: { type: string }[] };
    expect(err.code).toBe('invalid_argument');
    expect(err.message).toMatch(/not a valid protobuf message for \/palimpsest\.v1\.SessionService\/GetSession/);
    expect(err.details.map((d) => d.type)).toEqual(['google.rpc.ErrorInfo', 'google.rpc.BadRequest']);
    // Connect streaming and gRPC-Web: the status in the end-of-stream frame / trailers.
    const stream = await fetch(url('SubscribeSurface'), { method: 'POST', headers: { 'content-type': 'application/connect+proto' }, body: frame(garbage) });
    expect(Buffer.from(await stream.arrayBuffer()).toString('latin1')).toMatch(/"code":"invalid_argument".*not a valid protobuf message/);
    const web = await fetch(url('GetSession'), { method: 'POST', headers: { 'content-type': 'application/grpc-web+proto' }, body: frame(garbage) });
    const trailer = Buffer.from(await web.arrayBuffer()).toString('latin1');
    expect(trailer).toMatch(/grpc-status: ?3/);
    expect(trailer).toMatch(/grpc-status-details-bin/);
    // A well-formed request right after is served.
    expect((await webClient(base, 'connect', '1.1').listSessions({})).sessions.length).toBeGreaterThan(0);
  });
});

describe('web port limits', () => {
  it('advertises the call cap as SETTINGS_MAX_CONCURRENT_STREAMS: a third call waits for a slot instead of failing; serves grpc.health.v1', async () => {
    const s = await startTestServer({ webListen: '127.0.0.1:0', maxConcurrentStreams: 2 });
    const ac = new AbortController();
    try {
      const url = `http://127.0.0.1:${s.server.webPort}`;
      // One HTTP/2 connection (one transport) for all three calls.
      const c = webClient(url, 'connect', '2');
      await c.createSession({ sessionId: 'cap' });
      const open = async (signal: AbortSignal) => {
        const it = c.subscribeSurface({ sessionId: 'cap' }, { signal })[Symbol.asyncIterator]();
        expect((await it.next()).value?.kind.case).toBe('caughtUp');
        return it;
      };
      const firstAc = new AbortController();
      const first = await open(firstAc.signal);
      await open(ac.signal);
      let done = false;
      const third = c.getSession({ sessionId: 'cap' }).then((r) => { done = true; return r; });
      await new Promise((r) => setTimeout(r, 200));
      expect(done).toBe(false);
      firstAc.abort();
      await first.next().catch(() => undefined);
      expect((await third).session?.id).toBe('cap');
      const health = createClient(Health, createConnectTransport({ baseUrl: url, httpVersion: '1.1' }));
      expect((await health.check({ service: 'palimpsest.v1.SessionService' })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    } finally {
      ac.abort();
      await s.stop();
    }
  });

  it('refuses a message above --max-message-bytes, and a plaintext web port off loopback without --insecure', async () => {
    const small = await startTestServer({ webListen: '127.0.0.1:0', maxMessageBytes: 64 * 1024 });
    try {
      const c = webClient(`http://127.0.0.1:${small.server.webPort}`, 'connect', '1.1');
      await c.createSession({ sessionId: 's' });
      const e = await webFailure(c.appendEvents({ sessionId: 's', events: [esEvent(userMessage('m', 'x'.repeat(100 * 1024)))] }));
      expect(e.code).toBe(Code.ResourceExhausted);
      expect((await c.getSession({ sessionId: 's' })).session?.eventCount).toBe(0n);
    } finally {
      await small.stop();
    }
    await expect(startTestServer({ webListen: '0.0.0.0:0' })).rejects.toThrow(/refusing to serve plaintext on 0\.0\.0\.0/);
  });
});
