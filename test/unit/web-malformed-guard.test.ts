/**
 * The web port's malformed-request guard (src/server/web/malformed-guard.ts): valid messages pass
 * byte for byte however the body is chunked; a message that does not decode becomes the marker
 * the bridge reports as INVALID_ARGUMENT; oversized messages are passed on unbuffered.
 */
import { describe, expect, it } from 'vitest';
import { fromBinary, toBinary, create } from '@bufbuild/protobuf';
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from '@connectrpc/connect/protocol';
import { guardMalformed, malformedCause } from '../../src/server/web/malformed-guard.js';
import { SessionService, GetSessionRequestSchema } from '../../gen/es/palimpsest/v1/service_pb.js';

const method = SessionService.method.getSession;

/** A fake Connect handler that records the body it was given. */
function recorder(): { handler: UniversalHandler; seen: () => Promise<Uint8Array> } {
  let body: AsyncIterable<Uint8Array> | undefined;
  const fn = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    body = req.body as AsyncIterable<Uint8Array>;
    return { status: 200 };
  };
  const handler = Object.assign(fn, { protocolNames: ['connect'], service: SessionService, method, requestPath: '/x', allowedMethods: ['POST'], supportedContentType: () => true }) as unknown as UniversalHandler;
  return {
    handler,
    async seen() {
      const parts: Buffer[] = [];
      for await (const c of body!) parts.push(Buffer.from(c));
      return Buffer.concat(parts);
    },
  };
}

async function* chunks(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

function request(type: string, body: AsyncIterable<Uint8Array>): UniversalServerRequest {
  return { httpVersion: '1.1', url: 'http://x/x', method: 'POST', header: new Headers({ 'content-type': type, 'content-length': '3' }), body, signal: new AbortController().signal, contextValues: undefined as never };
}

const frame = (flags: number, msg: Uint8Array) => Buffer.concat([Buffer.from([flags, 0, 0, msg.length >> 8, msg.length & 0xff]), Buffer.from(msg)]);

describe('guardMalformed', () => {
  const good = toBinary(GetSessionRequestSchema, create(GetSessionRequestSchema, { sessionId: 'main' }));
  const bad = Uint8Array.from([0xff, 0xff, 0xff]);

  for (const size of [1, 2, 7, 1000]) {
    it(`passes valid enveloped frames unchanged and marks a bad one (chunks of ${size})`, async () => {
      const r = recorder();
      const body = Buffer.concat([frame(0, good), frame(0, bad), frame(1, bad), frame(0, good)]);
      await guardMalformed(r.handler, 1 << 20)(request('application/grpc-web+proto', chunks(body, size)));
      const out = Buffer.from(await r.seen());
      const frames: { flags: number; msg: Buffer }[] = [];
      for (let i = 0; i < out.length;) {
        const len = out.readUInt32BE(i + 1);
        frames.push({ flags: out[i]!, msg: out.subarray(i + 5, i + 5 + len) });
        i += 5 + len;
      }
      expect(frames.map((f) => f.flags)).toEqual([0, 0, 1, 0]);
      expect(frames[0]!.msg.equals(Buffer.from(good))).toBe(true);
      expect(malformedCause(fromBinary(GetSessionRequestSchema, frames[1]!.msg))).toMatch(/premature EOF|invalid/i);
      // A compressed frame is not ours to check.
      expect(frames[2]!.msg.equals(Buffer.from(bad))).toBe(true);
      expect(frames[3]!.msg.equals(Buffer.from(good))).toBe(true);
    });
  }

  it('checks a Connect unary body whole, and drops the content-length the marker would contradict', async () => {
    const r = recorder();
    let seenHeader: Headers | undefined;
    const h = Object.assign(async (req: UniversalServerRequest) => {
      seenHeader = req.header;
      return r.handler(req);
    }, r.handler) as UniversalHandler;
    await guardMalformed(h, 1 << 20)(request('application/proto', chunks(bad, 1)));
    expect(malformedCause(fromBinary(GetSessionRequestSchema, await r.seen()))).toBeDefined();
    expect(seenHeader?.get('content-length')).toBeNull();
    const ok = recorder();
    await guardMalformed(ok.handler, 1 << 20)(request('application/proto', chunks(good, 3)));
    expect(Buffer.from(await ok.seen()).equals(Buffer.from(good))).toBe(true);
    expect(malformedCause(fromBinary(GetSessionRequestSchema, good))).toBeUndefined();
  });

  it('passes bodies above the limit through unchecked (Connect refuses them) and leaves JSON alone', async () => {
    const big = new Uint8Array(64).fill(0xff);
    const r = recorder();
    await guardMalformed(r.handler, 16)(request('application/proto', chunks(big, 10)));
    expect(Buffer.from(await r.seen()).equals(Buffer.from(big))).toBe(true);
    const j = recorder();
    const json = new TextEncoder().encode('{"sessionId":1}');
    await guardMalformed(j.handler, 1 << 20)(request('application/json', chunks(json, 4)));
    expect(Buffer.from(await j.seen()).toString()).toBe('{"sessionId":1}');
  });
});
