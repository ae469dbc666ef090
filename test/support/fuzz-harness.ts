/**
 * Hostile-input harness (issue 9): malformed protobuf, random bytes on the wire, wrong field
 * types, huge and deeply nested JSON, invalid UTF-8, out-of-range seqs and adversarial surface
 * ops, sent at a real server. Every batch ends with a poison event, so nothing may be appended:
 * afterwards the database files and a full export must be byte-identical.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { Client, credentials, status, type ServiceError } from '@grpc/grpc-js';
import fc from 'fast-check';
import { AppendEventsRequest } from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import type { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';

/** Status codes a hostile request may legitimately get. INTERNAL/UNKNOWN mean a server bug. */
export const ACCEPTABLE_CODES = new Set([
  status.INVALID_ARGUMENT, status.FAILED_PRECONDITION, status.NOT_FOUND, status.RESOURCE_EXHAUSTED,
  status.OUT_OF_RANGE, status.ALREADY_EXISTS, status.UNIMPLEMENTED,
]);

/** SHA-256 of the database file and its WAL. */
export function dbChecksum(path: string): string {
  const h = createHash('sha256');
  for (const f of [path, `${path}-wal`]) if (existsSync(f)) h.update(readFileSync(f));
  return h.digest('hex');
}

/** Exports every listed session as one string. */
export async function exportAll(client: SessionServiceClient, ids: string[]): Promise<string> {
  let out = '';
  for (const id of ids) {
    out += await new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const s = client.exportSession({ sessionId: id, unpacked: false, blobRefs: false });
      s.on('data', (m: { chunk: Buffer }) => chunks.push(m.chunk));
      s.on('error', reject);
      s.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
  }
  return out;
}

/** Sends raw bytes to a unary method; resolves with the status code. */
export function sendRaw(address: string, path: string, bytes: Buffer): Promise<number> {
  const c = new Client(address, credentials.createInsecure());
  return new Promise((resolve) => {
    c.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, bytes, (err: ServiceError | null) => {
      c.close();
      resolve(err ? err.code : status.OK);
    });
  });
}

const surfaceTypes = ['user/message', 'assistant/message', 'tool/result'];

/** A deeply nested JSON text (beyond any sane limit). */
export function deepJson(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

/** Arbitrary JSON data text: valid, huge, deep, broken, or with lone surrogates. */
const dataText = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null'),
  fc.integer({ min: 150, max: 5000 }).map(deepJson),
  fc.string({ maxLength: 30 }),
  fc.constantFrom('-0', '1e999', 'NaN', '{"a":1,}', '"\\ud800"', '[1,,2]', '', '{"__proto__":{"x":1}}'),
  fc.integer({ min: 1, max: 3 }).map((n) => JSON.stringify({ big: 'x'.repeat(n * 1_500_000) })),
);

const seqValue = fc.oneof(fc.nat({ max: 50 }), fc.constantFrom(0, 2 ** 31, 2 ** 53 - 1, 2 ** 52));

/** An arbitrary (probably invalid) event. */
export const hostileEvent: fc.Arbitrary<EventInput> = fc.record({
  type: fc.oneof(fc.constantFrom(...surfaceTypes, 'turn/start', 'tool/call', 'request/header', 'request/header-delta', 'context/message', ''), fc.string({ maxLength: 20 })),
  data: fc.oneof(
    dataText.map((value) => ({ kind: { $case: 'json' as const, value } })),
    fc.constant(undefined),
  ),
  sourceEventSeqs: fc.option(fc.record({ seqs: fc.array(seqValue, { maxLength: 6 }) }), { nil: undefined }),
  surfaceOp: fc.option(fc.oneof(
    fc.constant({ $case: 'append' as const, value: {} }),
    fc.record({ start: seqValue, end: seqValue }).map((value) => ({ $case: 'replace' as const, value })),
  ), { nil: undefined }),
  ignorable: fc.boolean(),
  seq: fc.option(seqValue, { nil: undefined }),
  time: fc.option(fc.oneof(fc.integer(), fc.constant(Number.MAX_SAFE_INTEGER)), { nil: undefined }),
}).map((e) => e as EventInput);

/** An event no validator may accept: a surface type without surfaceOp and with a broken shape. */
export const POISON: EventInput = {
  type: 'user/message',
  data: { kind: { $case: 'json', value: '{"poison":true}' } },
  sourceEventSeqs: undefined,
  surfaceOp: undefined,
  ignorable: false,
};

/** A hostile AppendEvents request (always ends with POISON). */
export const hostileAppend = (sessionIds: string[]): fc.Arbitrary<AppendEventsRequest> => fc.record({
  sessionId: fc.oneof(fc.constantFrom(...sessionIds), fc.string({ maxLength: 10 })),
  events: fc.array(hostileEvent, { maxLength: 5 }).map((es) => [...es, POISON]),
  expectedLastSeq: fc.option(fc.integer({ min: -5, max: 100 }), { nil: undefined }),
  idempotencyKey: fc.oneof(fc.constant(''), fc.string({ maxLength: 8 })),
});

/** Raw wire garbage for a method: random bytes, truncated/corrupted valid messages, invalid UTF-8 in strings. */
export const hostileBytes: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
  fc.tuple(fc.string({ maxLength: 10 }), fc.nat({ max: 30 })).map(([id, cut]) => {
    const valid = Buffer.from(AppendEventsRequest.encode({ sessionId: id, events: [POISON], idempotencyKey: '' }).finish());
    return valid.subarray(0, Math.max(0, valid.length - cut));
  }),
  // field 1 (session_id, string) with invalid UTF-8 bytes
  fc.uint8Array({ minLength: 1, maxLength: 20 }).map((a) => Buffer.concat([Buffer.from([0x0a, a.length + 2, 0xc3, 0x28]), Buffer.from(a)])),
  // field 1 with the wrong wire type (varint), field 2 as a fixed64
  fc.bigUint64Array({ maxLength: 3 }).map((a) => Buffer.concat([Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x11]), Buffer.from(a.buffer)])),
);
