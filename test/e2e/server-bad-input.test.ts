/**
 * Malformed and hostile requests: each gets the right status code (with google.rpc details where
 * the server sees the request), the server stays up, and the stored sessions are unchanged
 * (export before == export after; the session list is the same).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, credentials, status, type ServiceError } from '@grpc/grpc-js';
import { AppendEventsRequest, DataFormat, Direction, ListEventsRequest } from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import { decodeError, type DecodedError } from '../../src/client/error-details.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { input, userMessage, assistantMessage, replaceOp } from '../support/events.js';
import { api, failure, fixture, type Api } from '../support/e2e.js';

const MAX_MESSAGE = 1024 * 1024;
let t: TestServer;
let a: Api;
let raw: Client;
let exportsBefore: Map<string, string>;

async function snapshot(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const { sessions } = await a.listSessions({ pageSize: 1000 });
  for (const s of sessions) out.set(s.id, await a.exportSession(s.id));
  return out;
}

beforeAll(async () => {
  t = await startTestServer({ maxMessageBytes: MAX_MESSAGE, limits: { maxBatchEvents: 1000, maxEventBytes: 100_000 } as never });
  a = api(t.client);
  raw = new Client(t.server.address, credentials.createInsecure());
  await a.createSession({ sessionId: 'keep' });
  await a.appendEvents({ sessionId: 'keep', events: [input('turn/start', { turn: 1 }), userMessage('u', 'hello'), input('assistant/chunk', { turn: 1, step: 1 }), assistantMessage('a', 'hi', [2])] });
  await a.importSession({ sessionId: 'keep-import' }, fixture('compaction-recovery.jsonl'));
  await a.createSession({ sessionId: 'keep-empty', labels: { x: 'y' } });
  exportsBefore = await snapshot();
});

afterAll(async () => {
  raw?.close();
  await t?.stop();
});

/** A unary call with hand-made request bytes; resolves with the decoded status (code 0 on success). */
function rawCall(method: string, body: Buffer): Promise<DecodedError> {
  return new Promise((resolve) => {
    raw.makeUnaryRequest(`/palimpsest.v1.SessionService/${method}`, (b: Buffer) => b, (b: Buffer) => b, body, { deadline: Date.now() + 10_000 }, (err: ServiceError | null) => {
      resolve(err ? decodeError(err) : { code: status.OK, message: '', reason: '', domain: '', metadata: {} });
    });
  });
}

/** Protobuf varint. */
function varint(n: bigint): number[] {
  const out: number[] = [];
  while (n > 0x7fn) {
    out.push(Number(n & 0x7fn) | 0x80);
    n >>= 7n;
  }
  out.push(Number(n));
  return out;
}

const tagged = (field: number, wire: number, bytes: number[]): number[] => [...varint(BigInt((field << 3) | wire)), ...bytes];
const lenDelim = (field: number, body: number[]): number[] => tagged(field, 2, [...varint(BigInt(body.length)), ...body]);
const str = (field: number, s: string): number[] => lenDelim(field, [...Buffer.from(s)]);

describe('bad input', () => {
  it('random bytes to every request-reading method: a client error (never a crash), no side effects', async () => {
    const methods = ['GetSession', 'ListSessions', 'DeleteSession', 'AppendEvents', 'ListEvents', 'GetSurface', 'GetMessages', 'RepairSession', 'ForkSession'];
    let parseFailures = 0;
    for (let i = 0; i < 150; i++) {
      const method = methods[i % methods.length] as string;
      const body = randomBytes(1 + ((i * 37) % 300));
      const e = await rawCall(method, body);
      // What the server could not parse is INVALID_ARGUMENT naming the request (never grpc-js'
      // INTERNAL "Error deserializing request"); what it could parse is rejected as a client error.
      expect([status.OK, status.INVALID_ARGUMENT, status.NOT_FOUND, status.FAILED_PRECONDITION, status.RESOURCE_EXHAUSTED], `${method} ${body.toString('hex')}: ${e.code} ${e.reason} ${e.message}`).toContain(e.code);
      if (e.code !== status.OK) expect(e.domain).toBe('palimpsest.dev');
      if (e.reason === 'INVALID_ARGUMENT' && e.metadata.field === 'request') parseFailures++;
    }
    expect(parseFailures).toBeGreaterThan(10);
  });

  it('valid wire format with wrong field types is read as unset fields', async () => {
    // session_id (field 1, string) sent as a varint: skipped, so the id is empty.
    expect(await rawCall('GetSession', Buffer.from(tagged(1, 0, varint(42n))))).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_ARGUMENT', metadata: { field: 'session_id' } });
    // events (field 2, message) sent as a fixed64: skipped, so the batch is empty.
    expect(await rawCall('AppendEvents', Buffer.from([...str(1, 'keep'), ...tagged(2, 1, [1, 2, 3, 4, 5, 6, 7, 8])]))).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'BATCH_EMPTY' });
  });

  it('a seq beyond 2^53-1 is INVALID_ARGUMENT with details, not an internal error', async () => {
    const huge = 2n ** 60n;
    const event = [...str(1, 'x/y'), ...lenDelim(2, str(1, '{}')), ...tagged(7, 0, varint(huge))];
    const e = await rawCall('AppendEvents', Buffer.from([...str(1, 'keep'), ...lenDelim(2, event)]));
    expect(e).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_ARGUMENT', domain: 'palimpsest.dev' });
    expect(e.message).toMatch(/2\^53|MAX_SAFE_INTEGER/);
    expect(e.badRequest?.fieldViolations).toHaveLength(1);
    const from = await rawCall('ListEvents', Buffer.from([...str(1, 'keep'), ...tagged(2, 0, varint(huge))]));
    expect(from).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'INVALID_ARGUMENT' });
    // The largest safe seq is read fine (and is just not contiguous).
    const safe = [...str(1, 'x/y'), ...lenDelim(2, str(1, '{}')), ...tagged(7, 0, varint(BigInt(Number.MAX_SAFE_INTEGER)))];
    expect(await rawCall('AppendEvents', Buffer.from([...str(1, 'keep'), ...lenDelim(2, safe)]))).toMatchObject({ code: status.FAILED_PRECONDITION, reason: 'SEQ_NOT_CONTIGUOUS' });
    // Encoded by the generated client the request is the same bytes as a well-formed one.
    expect(AppendEventsRequest.decode(Buffer.from([...str(1, 'keep')])).sessionId).toBe('keep');
    expect(ListEventsRequest.decode(Buffer.from([...str(1, 'keep')])).fromSeq).toBeUndefined();
  });

  it('a message over the max message size is RESOURCE_EXHAUSTED', async () => {
    const big = 'x'.repeat(MAX_MESSAGE + 1000);
    const e = await failure(a.appendEvents({ sessionId: 'keep', events: [input('x/y', big)] }));
    expect(e.code).toBe(status.RESOURCE_EXHAUSTED);
    const r = await rawCall('AppendEvents', Buffer.alloc(MAX_MESSAGE + 1));
    expect(r.code).toBe(status.RESOURCE_EXHAUSTED);
  });

  it('a huge batch, an over-limit event, an unknown session', async () => {
    expect(await failure(a.appendEvents({ sessionId: 'keep', events: Array.from({ length: 1001 }, () => input('x/y', 1)) }))).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'BATCH_TOO_LARGE' });
    expect(await failure(a.appendEvents({ sessionId: 'keep', events: [input('x/y', 'y'.repeat(100_000))] }))).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'EVENT_TOO_LARGE', metadata: { limit: '100000', actual: '100002' } });
    // Typed data counts too (its JSON size).
    const typed: EventInput = {
      type: 'user/message', surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: undefined, ignorable: false,
      data: { kind: { $case: 'userMessage', value: { id: 'u', role: 'user', content: [{ block: { $case: 'text', value: { text: 'z'.repeat(100_000) } } }], source: { kind: { $case: 'user', value: {} } } } } },
    };
    expect(await failure(a.appendEvents({ sessionId: 'keep', events: [typed] }))).toMatchObject({ code: status.RESOURCE_EXHAUSTED, reason: 'EVENT_TOO_LARGE' });
    // Measured in UTF-8 bytes in both forms (60000 'é' are 120000 bytes but 60000 UTF-16 units).
    const wide = 'é'.repeat(60_000);
    expect(await failure(a.appendEvents({ sessionId: 'keep', events: [input('x/y', wide)] }))).toMatchObject({ reason: 'EVENT_TOO_LARGE', metadata: { actual: '120002' } });
    const typedWide: EventInput = { ...typed, data: { kind: { $case: 'userMessage', value: { id: 'u', role: 'user', content: [{ block: { $case: 'text', value: { text: wide } } }], source: { kind: { $case: 'user', value: {} } } } } } };
    const tw = await failure(a.appendEvents({ sessionId: 'keep', events: [typedWide] }));
    expect(tw).toMatchObject({ reason: 'EVENT_TOO_LARGE' });
    expect(Number(tw.metadata.actual)).toBeGreaterThan(120_000);
    expect(await failure(a.appendEvents({ sessionId: 'no-such', events: [input('x/y', 1)] }))).toMatchObject({ code: status.NOT_FOUND, reason: 'SESSION_NOT_FOUND' });
  });

  it('a page of large events is cut below the max message size instead of failing', async () => {
    await a.createSession({ sessionId: 'big-page' });
    for (let i = 0; i < 15; i++) await a.appendEvents({ sessionId: 'big-page', events: [input('x/y', `${i}:${'z'.repeat(90_000)}`)] });
    // Both data forms: the json form's pages come encoded from the SQLite store's extension.
    for (const [direction, dataFormat] of [Direction.DIRECTION_FORWARD, Direction.DIRECTION_BACKWARD].flatMap((d) => [DataFormat.DATA_FORMAT_TYPED, DataFormat.DATA_FORMAT_JSON].map((f) => [d, f] as const))) {
      const seqs: number[] = [];
      let pageToken = '';
      let pages = 0;
      do {
        const p = await a.listEvents({ sessionId: 'big-page', pageToken, direction, dataFormat });
        expect(p.events.length).toBeGreaterThan(0);
        seqs.push(...p.events.map((e) => e.seq));
        pageToken = p.nextPageToken;
        pages++;
      } while (pageToken);
      expect(pages).toBeGreaterThan(1);
      const all = Array.from({ length: 15 }, (_, i) => i);
      expect(seqs).toEqual(direction === Direction.DIRECTION_FORWARD ? all : all.reverse());
    }
    await a.deleteSession({ sessionId: 'big-page' });
  });

  it('invalid surface ops', async () => {
    const cases: [EventInput, string][] = [
      [{ ...userMessage('r', 'x'), surfaceOp: replaceOp(3, 1), sourceEventSeqs: { seqs: [1, 3] } }, 'REPLACE_START_AFTER_END'],
      [{ ...userMessage('r', 'x'), surfaceOp: replaceOp(2, 2), sourceEventSeqs: { seqs: [2] } }, 'REPLACE_START_NOT_ON_SURFACE'],
      [{ ...userMessage('r', 'x'), surfaceOp: replaceOp(1, 1000), sourceEventSeqs: { seqs: [1] } }, 'REPLACE_END_NOT_ON_SURFACE'],
      [{ ...userMessage('r', 'x'), surfaceOp: replaceOp(1, 3), sourceEventSeqs: { seqs: [1] } }, 'REPLACE_SOURCES_INCOMPLETE'],
      [{ ...input('x/y', {}), surfaceOp: replaceOp(1, 1) }, 'SURFACE_OP_FORBIDDEN'],
      [{ ...userMessage('r', 'x'), surfaceOp: undefined }, 'SURFACE_OP_REQUIRED'],
    ];
    for (const [ev, reason] of cases) {
      const e = await failure(a.appendEvents({ sessionId: 'keep', events: [ev] }));
      expect(e.reason).toBe(reason);
      expect([status.INVALID_ARGUMENT, status.FAILED_PRECONDITION]).toContain(e.code);
    }
  });

  it('NOT_JSON text, non-finite and lossy numbers', async () => {
    for (const text of ['{', 'undefined', "{'a':1}", 'NaN', '', '[1,]', '"\\x"']) {
      const e = await failure(a.appendEvents({ sessionId: 'keep', events: [{ ...input('x/y', 0), data: { kind: { $case: 'json', value: text } } }] }));
      expect(e, JSON.stringify(text)).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'NOT_JSON', metadata: { index: '0' } });
    }
    for (const text of ['1e400', '-0']) {
      const e = await failure(a.appendEvents({ sessionId: 'keep', events: [{ ...input('x/y', 0), data: { kind: { $case: 'json', value: text } } }] }));
      expect(e.code, text).toBe(status.INVALID_ARGUMENT);
    }
  });

  it('deeply nested JSON is DATA_TOO_DEEP (json form), and never an internal error in typed forms or imports', async () => {
    const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);
    expect(await failure(a.appendEvents({ sessionId: 'keep', events: [{ ...input('x/y', 0), data: { kind: { $case: 'json', value: deep(100_000) } } }] }))).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'DATA_TOO_DEEP' });
    expect(await failure(a.appendEvents({ sessionId: 'keep', events: [{ ...input('x/y', 0), data: { kind: { $case: 'json', value: `{"a":${deep(201)}}` } } }] }))).toMatchObject({ reason: 'DATA_TOO_DEEP' });
    // Embedded JSON texts of the typed forms.
    const meta: EventInput = {
      type: 'tool/result', surfaceOp: { $case: 'append', value: {} }, sourceEventSeqs: undefined, ignorable: false,
      data: {
        kind: {
          $case: 'toolResult', value: {
            turn: 1, step: 1, error: undefined, metaJson: deep(50_000),
            message: { id: 'r', role: 'user', content: [{ block: { $case: 'toolResult', value: { toolCallId: 'c', content: [], isError: undefined } } }], source: { kind: { $case: 'tool', value: { callId: 'c' } } } },
          },
        },
      },
    };
    const e1 = await failure(a.appendEvents({ sessionId: 'keep', events: [meta] }));
    expect(e1).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'DATA_TOO_DEEP' });
    // A reference file with a too-deep line.
    const file = `{"type":"session","version":0,"id":"deep","createdAt":1}\n{"type":"x/y","seq":0,"time":1,"data":${deep(50_000)}}\n`;
    const e2 = await failure(a.importSession({ sessionId: 'deep' }, Buffer.from(file)));
    expect(e2).toMatchObject({ code: status.INVALID_ARGUMENT, reason: 'DATA_TOO_DEEP', metadata: { line: '2' } });
    expect((await failure(a.getSession({ sessionId: 'deep' }))).reason).toBe('SESSION_NOT_FOUND');
    // At the limit, both forms are accepted, and what was accepted imports again.
    // A bare tool/result (no call): off the tool-pairing guard, which would refuse it (TOOL_RESULT_ORPHANED).
    await a.createSession({ sessionId: 'deep-ok', pairingGuard: false });
    await a.appendEvents({ sessionId: 'deep-ok', events: [{ ...input('x/y', 0), data: { kind: { $case: 'json', value: deep(200) } } }, { ...meta, data: { kind: { ...meta.data!.kind!, value: { ...(meta.data!.kind!.value as object), metaJson: deep(190) } } as never } }] });
    const exported = await a.exportSession('deep-ok');
    await a.deleteSession({ sessionId: 'deep-ok' });
    await a.importSession({ sessionId: 'deep-ok' }, Buffer.from(exported));
    expect(await a.exportSession('deep-ok')).toBe(exported);
    await a.deleteSession({ sessionId: 'deep-ok' });
  });

  it('the server is still up and every stored session is unchanged', async () => {
    expect(await snapshot()).toEqual(exportsBefore);
    const ok = await a.appendEvents({ sessionId: 'keep-empty', events: [input('x/y', {})] });
    expect(ok.seqs).toEqual([0]);
  });
});
