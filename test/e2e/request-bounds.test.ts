/**
 * Bounds on request strings (issue #17, findings 1, 7 and 8). A ~60,000 character session id on
 * any call used to never complete and wedge every later call on the same client connection (the
 * error echoed the whole id into trailers larger than the client's HTTP/2 header list). Every
 * call on ONE shared connection must now fail fast with INVALID_SESSION_ID naming the limit,
 * echo at most a short prefix, keep the connection usable and hold no memory per call; every
 * other string the server echoes or stores is bounded the same way, with the limit and the
 * actual size in the details; expected_last_seq below -1 is malformed.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status, type ClientReadableStream, type Metadata, type ServiceError } from '@grpc/grpc-js';
import { ExportSessionRequest, SubscribeEventsRequest, SubscribeSurfaceRequest } from '../../gen/palimpsest/v1/service.js';
import { decodeError, type DecodedError } from '../../src/client/error-details.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { api, type Api } from '../support/e2e.js';
import { input, userMessage } from '../support/events.js';
import { ensureBuilt } from '../support/server-process.js';
import { runCli } from '../support/cli.js';

const LONG = 'x'.repeat(60_000);
let t: TestServer;
let a: Api;
let before: string;

beforeAll(async () => {
  t = await startTestServer();
  a = api(t.client);
  await a.createSession({ sessionId: 'keep', labels: { team: 'a' } });
  await a.appendEvents({ sessionId: 'keep', events: [input('turn/start', { turn: 1 }), userMessage('u', 'hello')] });
  before = await a.exportSession('keep');
});
afterAll(async () => { await t?.stop(); });

/** Bytes of the trailers a failed call carried (grpc-message + every metadata entry). */
function trailerBytes(err: ServiceError): number {
  let n = Buffer.byteLength(err.details ?? '');
  const md: Metadata = err.metadata;
  for (const [k, vs] of Object.entries(md.getMap())) n += k.length + (Buffer.isBuffer(vs) ? vs.length : Buffer.byteLength(String(vs)));
  return n;
}

async function unaryFailure(p: Promise<unknown>): Promise<{ d: DecodedError; bytes: number }> {
  try {
    await p;
  } catch (e) {
    return { d: decodeError(e as ServiceError), bytes: trailerBytes(e as ServiceError) };
  }
  throw new Error('expected the call to fail');
}

function streamFailure(s: ClientReadableStream<unknown>): Promise<{ d: DecodedError; bytes: number }> {
  return new Promise((resolve, reject) => {
    s.on('data', () => reject(new Error('expected no data')));
    s.on('error', (e: ServiceError) => resolve({ d: decodeError(e), bytes: trailerBytes(e) }));
    s.on('end', () => reject(new Error('expected the stream to fail')));
  });
}

/** Every RPC that takes a session id, each with the long id, on the shared connection. */
function everyCall(id: string): Promise<{ d: DecodedError; bytes: number }>[] {
  const deadline = { deadline: Date.now() + 10_000 };
  return [
    unaryFailure(a.createSession({ sessionId: id })),
    unaryFailure(a.getSession({ sessionId: id })),
    unaryFailure(a.deleteSession({ sessionId: id })),
    unaryFailure(a.appendEvents({ sessionId: id, events: [input('x/y', 1)] })),
    unaryFailure(a.listEvents({ sessionId: id })),
    unaryFailure(a.getSurface({ sessionId: id })),
    unaryFailure(a.getMessages({ sessionId: id, view: 1 })),
    unaryFailure(a.forkSession({ sessionId: id })),
    unaryFailure(a.forkSession({ sessionId: 'keep', childSessionId: id })),
    unaryFailure(a.repairSession({ sessionId: id })),
    unaryFailure(a.planCompaction({ sessionId: id, budget: { $case: 'keepTokens', value: 10 } })),
    unaryFailure(a.compact({ sessionId: id, start: 0, end: 0, expectedLastSeq: 0, summary: { $case: 'summaryText', value: 's' }, provider: 'p', model: 'm' })),
    unaryFailure(a.pruneToolResults({ sessionId: id, seqs: [0] })),
    unaryFailure(a.importSession({ sessionId: id }, Buffer.from('{"type":"session","version":0,"id":"i","createdAt":1}\n'))),
    streamFailure(t.client.exportSession(ExportSessionRequest.fromPartial({ sessionId: id }), deadline)),
    streamFailure(t.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial({ sessionId: id }), deadline)),
    streamFailure(t.client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: id }), deadline)),
  ];
}

describe('a ~60,000 character session id', () => {
  it('fails fast on every call with INVALID_SESSION_ID, echoes a short prefix only, and the connection stays usable', async () => {
    const results = await Promise.all(everyCall(LONG));
    for (const [i, { d, bytes }] of results.entries()) {
      expect(d, `call ${i}`).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_SESSION_ID', domain: 'palimpsest.dev', metadata: { limit: '128', actual: '60000' } });
      expect(d.metadata.field, `call ${i}`).toMatch(/session_id$/);
      expect(d.message.length, `call ${i}: ${d.message.slice(0, 200)}`).toBeLessThan(200);
      expect(d.message).toContain('(60000 characters)');
      expect(bytes, `call ${i}`).toBeLessThan(2048);
    }
    // The same connection serves the next call at once.
    expect((await a.getSession({ sessionId: 'keep' })).session?.id).toBe('keep');
    expect(await a.exportSession('keep')).toBe(before);
  });

  it('200 such calls on one connection hold no memory', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const round = async (): Promise<void> => {
      for (let i = 0; i < 20; i++) {
        const r = await Promise.all(Array.from({ length: 10 }, () => unaryFailure(a.getSession({ sessionId: LONG }))));
        for (const { d } of r) expect(d.reason).toBe('INVALID_SESSION_ID');
      }
    };
    await round(); // warm up (code paths, pools)
    gc();
    const start = process.memoryUsage().heapUsed;
    await round();
    gc();
    // 200 calls carried 12 MB of ids; what is left must not grow with them.
    const grown = process.memoryUsage().heapUsed - start;
    expect(grown, `${grown} bytes`).toBeLessThan(4 * 1024 * 1024);
    expect((await a.getSurface({ sessionId: 'keep' })).seqs).toEqual([1]);
  });
});

describe('every other string the server echoes or stores is bounded', () => {
  it('labels: count, key and value size, with the limit and the actual size', async () => {
    const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v']));
    const e1 = await unaryFailure(a.createSession({ sessionId: 'lab1', labels: many }));
    expect(e1.d).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'TOO_MANY_LABELS', metadata: { field: 'labels', limit: '64', actual: '65', limitName: 'max_labels' } });
    expect(e1.d.quotaFailure?.violations[0]?.subject).toBe('max_labels');
    const e2 = await unaryFailure(a.createSession({ sessionId: 'lab2', labels: { [LONG]: 'v' } }));
    expect(e2.d).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'FIELD_TOO_LONG', metadata: { limit: '128', actual: '60000', limitName: 'max_label_key_bytes' } });
    expect(e2.d.badRequest?.fieldViolations[0]?.field).toMatch(/^labels key "x{32}"… \(60000 characters\)$/);
    expect(e2.bytes).toBeLessThan(2048);
    const e3 = await unaryFailure(a.createSession({ sessionId: 'lab3', labels: { k: 'é'.repeat(513) } }));
    expect(e3.d).toMatchObject({ reason: 'FIELD_TOO_LONG', metadata: { limit: '1024', actual: '1026', limitName: 'max_label_value_bytes' } });
    // At the limits: accepted.
    const atLimit = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`${i}`.padEnd(128, 'k'), 'v'.repeat(1024)]));
    await a.createSession({ sessionId: 'lab-ok', labels: atLimit });
    // Fork and import options, and a label selector.
    expect((await unaryFailure(a.forkSession({ sessionId: 'keep', childSessionId: 'f1', labels: many }))).d.reason).toBe('TOO_MANY_LABELS');
    expect((await unaryFailure(a.importSession({ sessionId: 'i1', labels: many }, Buffer.from('{"type":"session","version":0,"id":"i","createdAt":1}\n')))).d)
      .toMatchObject({ reason: 'TOO_MANY_LABELS', metadata: { field: 'options.labels' } });
    expect((await unaryFailure(a.listSessions({ labelSelector: { [LONG]: 'v' } }))).d).toMatchObject({ reason: 'FIELD_TOO_LONG' });
    for (const id of ['lab1', 'lab2', 'lab3', 'f1', 'i1']) expect((await unaryFailure(a.getSession({ sessionId: id }))).d.reason).toBe('SESSION_NOT_FOUND');
    await a.deleteSession({ sessionId: 'lab-ok' });
  });

  it('header strings, page tokens, event types and idempotency keys', async () => {
    const cases: [() => Promise<unknown>, string, string][] = [
      [() => a.createSession({ sessionId: 'h1', cwd: `/${LONG}` }), 'cwd', '4096'],
      [() => a.createSession({ sessionId: 'h2', agentPreset: LONG }), 'agent_preset', '256'],
      [() => a.createSession({ sessionId: 'h3', origin: LONG }), 'origin', '64'],
      [() => a.listSessions({ pageToken: LONG }), 'page_token', '1024'],
      [() => a.listEvents({ sessionId: 'keep', pageToken: LONG }), 'page_token', '1024'],
      [() => a.getMessages({ sessionId: 'keep', view: 1, pageToken: LONG }), 'page_token', '1024'],
      [() => a.appendEvents({ sessionId: 'keep', events: [input('x/y', 1), input('t'.repeat(257), 1)] }), 'events[1].type', '256'],
      [() => a.appendEvents({ sessionId: 'keep', idempotencyKey: 'k'.repeat(257), events: [input('x/y', 1)] }), 'idempotency_key', '256'],
      [() => a.listEvents({ sessionId: 'keep', types: [LONG] }), 'types[0]', '256'],
      // Compact and PruneToolResults look their key up before planning (issue #14).
      [() => a.compact({ sessionId: 'keep', start: 1, end: 1, idempotencyKey: 'k'.repeat(257) }), 'idempotency_key', '256'],
      [() => a.pruneToolResults({ sessionId: 'keep', seqs: [1], idempotencyKey: 'k'.repeat(257) }), 'idempotency_key', '256'],
    ];
    for (const [p, field, limit] of cases) {
      const { d, bytes } = await unaryFailure(p());
      expect(d, field).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'FIELD_TOO_LONG', metadata: { field, limit } });
      expect(d.badRequest?.fieldViolations[0]?.field, field).toBe(field);
      expect(bytes, field).toBeLessThan(2048);
    }
    // The event type limit names the failing event.
    const { d } = await unaryFailure(a.appendEvents({ sessionId: 'keep', events: [input('x/y', 1), input('t'.repeat(257), 1)] }));
    expect(d.metadata).toMatchObject({ index: '1', actual: '257', limitName: 'max_event_type_bytes' });
    // At the limits: accepted (and the log shows exactly these appends).
    const ok = await a.appendEvents({ sessionId: 'keep', idempotencyKey: 'k'.repeat(256), events: [input('t'.repeat(256), 1)] });
    expect(ok.seqs).toEqual([2]);
    for (const id of ['h1', 'h2', 'h3']) expect((await unaryFailure(a.getSession({ sessionId: id }))).d.reason).toBe('SESSION_NOT_FOUND');
    expect((await a.getSession({ sessionId: 'keep' })).session?.headSeq).toBe(2);
  });

  it('an imported file with an over-long event type is refused naming its line', async () => {
    const file = `{"type":"session","version":0,"id":"imp","createdAt":1}\n{"type":"${'t'.repeat(300)}","seq":0,"time":1,"data":{}}\n`;
    const { d } = await unaryFailure(a.importSession({ sessionId: 'imp' }, Buffer.from(file)));
    expect(d).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'FIELD_TOO_LONG', metadata: { line: '2', field: 'type', limit: '256', actual: '300' } });
    expect(d.metadata.index).toBeUndefined();
    expect(d.message).toMatch(/^line 2: type is 300 bytes/);
    expect((await unaryFailure(a.getSession({ sessionId: 'imp' }))).d.reason).toBe('SESSION_NOT_FOUND');
  });
});

describe('the CLI', () => {
  it('prints a clear error for a very long id (it used to exit 13 silently)', async () => {
    ensureBuilt();
    const r = await runCli(['get', LONG, '--addr', t.server.address]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: INVALID_SESSION_ID: session_id "x{32}"… \(60000 characters\) must be 1-128 characters/);
    expect(r.stderr.length).toBeLessThan(300);
  });
});

describe('expected_last_seq', () => {
  it('below -1 is a malformed request (INVALID_ARGUMENT), not HEAD_MISMATCH; -1 and the head keep their meaning', async () => {
    await a.createSession({ sessionId: 'els' });
    for (const bad of [-2, -1000]) {
      const { d } = await unaryFailure(a.appendEvents({ sessionId: 'els', expectedLastSeq: bad, events: [input('x/y', 1)] }));
      expect(d, String(bad)).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_ARGUMENT', metadata: { field: 'expected_last_seq', actual: String(bad) } });
      expect(d.badRequest?.fieldViolations[0]?.field).toBe('expected_last_seq');
    }
    // The same for the server-built batches of issue #14.
    for (const p of [
      a.compact({ sessionId: 'els', start: 0, end: 0, expectedLastSeq: -2, summary: { $case: 'summaryText', value: 's' }, provider: 'p', model: 'm' }),
      a.pruneToolResults({ sessionId: 'els', seqs: [0], expectedLastSeq: -2 }),
    ]) expect((await unaryFailure(p)).d).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_ARGUMENT', metadata: { field: 'expected_last_seq', actual: '-2' } });
    expect((await a.getSession({ sessionId: 'els' })).session?.eventCount).toBe(0);
    expect((await a.appendEvents({ sessionId: 'els', expectedLastSeq: -1, events: [input('x/y', 1)] })).seqs).toEqual([0]);
    expect((await unaryFailure(a.appendEvents({ sessionId: 'els', expectedLastSeq: -1, events: [input('x/y', 1)] }))).d)
      .toMatchObject({ code: status.FAILED_PRECONDITION, reason: 'HEAD_MISMATCH' });
    expect((await a.appendEvents({ sessionId: 'els', expectedLastSeq: 0, events: [input('x/y', 1)] })).seqs).toEqual([1]);
  });
});
