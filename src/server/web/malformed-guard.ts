/**
 * Malformed request bytes get INVALID_ARGUMENT with the usual details on the web port too.
 *
 * Connect decodes a request before any handler or interceptor runs, and answers bytes that are
 * not a valid protobuf message with INTERNAL ("parse binary: ..."), while the gRPC port answers
 * INVALID_ARGUMENT (safe-decode.ts). This guard sits between the HTTP request and Connect: it
 * checks each binary request message (the whole body for Connect unary calls, each data frame of
 * an enveloped stream: Connect streaming, gRPC-Web, gRPC) with the gRPC port's safe deserializer
 * (malformed bytes, invalid UTF-8, the request bounds) and with the decoder Connect will use,
 * and replaces one that is refused with a marker message (an empty message carrying the
 * refusal in one unknown field, MALFORMED_FIELD). The Connect adapter turns the marker into the
 * DomainError the gRPC port reports. Compressed frames and JSON bodies pass unchecked (Connect
 * reports their errors as INVALID_ARGUMENT itself).
 */
import { create, fromBinary, toBinary, type DescMessage, type Message } from '@bufbuild/protobuf';
import type { UniversalHandler, UniversalServerRequest } from '@connectrpc/connect/protocol';
import { DomainError } from '../../domain/errors.js';
import { malformedRequestError, refusalOf } from '../safe-decode.js';

/** The unknown field number of the marker (the largest valid field number). */
export const MALFORMED_FIELD = 536_870_911;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

/** The marker message of `schema` standing for the refusal `err`. */
export function malformedMarker(schema: DescMessage, err: DomainError): Uint8Array {
  const text = encoder.encode(JSON.stringify({ reason: err.reason, message: err.message, metadata: err.metadata }));
  const msg = create(schema) as Message & { $unknown?: { no: number; wireType: number; data: Uint8Array }[] };
  msg.$unknown = [{ no: MALFORMED_FIELD, wireType: 2, data: Uint8Array.from([...varint(text.length), ...text]) }];
  return toBinary(schema, msg);
}

/** The refusal a marker stands for, or undefined for a real message. */
export function refusalIn(msg: object): DomainError | undefined {
  const u = (msg as { $unknown?: { no: number; data: Uint8Array }[] }).$unknown?.find((f) => f.no === MALFORMED_FIELD);
  if (!u) return undefined;
  let i = 0;
  while ((u.data[i] as number) & 0x80) i++;
  const e = JSON.parse(decoder.decode(u.data.subarray(i + 1))) as { reason: string; message: string; metadata: Record<string, string> };
  return new DomainError(e.reason, e.message, e.metadata);
}

/** The message of the refusal a marker stands for, or undefined for a real message. */
export function malformedCause(msg: object): string | undefined {
  return refusalIn(msg)?.message;
}

/** How the guard checks one method's request bytes. */
interface Check {
  readonly schema: DescMessage;
  /** The gRPC port's safe deserializer of this method (safe-decode.ts), when known. */
  readonly decode: ((bytes: Buffer) => unknown) | undefined;
  readonly path: string;
  readonly name: string;
}

function checked(c: Check, bytes: Uint8Array): Uint8Array {
  if (c.decode) {
    // The exact bytes the client sent, through the gRPC port's deserializer: strict UTF-8 and
    // the request bounds (request-checks.ts) judge them as on the gRPC port (Connect's own
    // decode would replace invalid UTF-8 silently before the adapter sees the request).
    const refused = refusalOf(c.decode(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)), c.name);
    if (refused) return malformedMarker(c.schema, refused);
  }
  try {
    fromBinary(c.schema, bytes);
    return bytes;
  } catch (e) {
    return malformedMarker(c.schema, malformedRequestError(c.path, e instanceof Error ? e.message : String(e), c.name));
  }
}

async function* wholeBody(body: AsyncIterable<Uint8Array>, check: Check, limit: number): AsyncGenerator<Uint8Array> {
  const parts: Uint8Array[] = [];
  let size = 0;
  const it = body[Symbol.asyncIterator]();
  for (;;) {
    const n = await it.next();
    if (n.done) break;
    parts.push(n.value);
    size += n.value.length;
    if (size > limit) {
      // Over the message limit: Connect refuses it while reading; never buffer more here.
      yield* parts;
      for (let m = await it.next(); !m.done; m = await it.next()) yield m.value;
      return;
    }
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  yield checked(check, all);
}

/** Re-frames an enveloped body (flags:1, length:4 big-endian, message), checking data frames. */
async function* envelopes(body: AsyncIterable<Uint8Array>, check: Check, limit: number): AsyncGenerator<Uint8Array> {
  let buf = new Uint8Array(0);
  const it = body[Symbol.asyncIterator]();
  for (let n = await it.next(); !n.done; n = await it.next()) {
    const chunk = n.value;
    const next = new Uint8Array(buf.length + chunk.length);
    next.set(buf);
    next.set(chunk, buf.length);
    buf = next;
    for (;;) {
      if (buf.length < 5) break;
      const len = new DataView(buf.buffer, buf.byteOffset, 5).getUint32(1);
      if (len > limit) {
        // Over the message limit: Connect refuses the frame; pass the rest through unbuffered.
        yield buf;
        for (let m = await it.next(); !m.done; m = await it.next()) yield m.value;
        return;
      }
      if (buf.length < 5 + len) break;
      const flags = buf[0] as number;
      const frame = buf.subarray(5, 5 + len);
      buf = buf.subarray(5 + len);
      // Compressed (bit 0) or control (bit 1, bit 7) frames pass as they are.
      const message = flags === 0 ? checked(check, frame) : frame;
      const out = new Uint8Array(5 + message.length);
      out[0] = flags;
      new DataView(out.buffer).setUint32(1, message.length);
      out.set(message, 5);
      yield out;
    }
  }
  // A truncated frame is Connect's to report.
  if (buf.length > 0) yield buf;
}

/**
 * `handler` with its binary request messages checked (see the module comment); messages above
 * `limit` bytes (Connect's readMaxBytes) are not buffered here.
 */
export function guardMalformed(handler: UniversalHandler, limit: number, decode?: (bytes: Buffer) => unknown): UniversalHandler {
  const check: Check = { schema: handler.method.input, decode, path: handler.requestPath, name: handler.method.name };
  const guarded = (req: UniversalServerRequest) => {
    const type = (req.header.get('content-type') ?? '').toLowerCase();
    const body = req.body;
    if (type.includes('json') || type.includes('-text') || typeof body !== 'object' || body === null || !(Symbol.asyncIterator in body)) return handler(req);
    const bytes = body as AsyncIterable<Uint8Array>;
    const enveloped = type.startsWith('application/connect+') || type.startsWith('application/grpc');
    if (enveloped) return handler({ ...req, body: envelopes(bytes, check, limit) });
    // A marker has another length than the body it replaces: Connect must not hold it to the
    // client's content-length (it still enforces readMaxBytes while reading).
    const header = new Headers(req.header);
    header.delete('content-length');
    return handler({ ...req, header, body: wholeBody(bytes, check, limit) });
  };
  return Object.assign(guarded, { protocolNames: handler.protocolNames, service: handler.service, method: handler.method, requestPath: handler.requestPath, allowedMethods: handler.allowedMethods, supportedContentType: handler.supportedContentType });
}
