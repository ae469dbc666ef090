/**
 * The native transport's protocol pieces (src/server/native): the request framing across DATA
 * chunks cut anywhere, grpc-timeout in every unit, grpc-message percent-encoding.
 */
import { describe, expect, it } from 'vitest';
import { FrameDecoder, type FrameSink } from '../../src/server/native/frame-decoder.js';
import { parseGrpcTimeout } from '../../src/server/native/grpc-timeout.js';
import { percentEncode } from '../../src/server/native/percent-encode.js';

function frame(body: Buffer, flag = 0): Buffer {
  const h = Buffer.alloc(5);
  h[0] = flag;
  h.writeUInt32BE(body.length, 1);
  return Buffer.concat([h, body]);
}

class Collect implements FrameSink {
  readonly frames: { compressed: boolean; body: string }[] = [];
  tooLarge: number | undefined;
  onFrame(compressed: boolean, body: Buffer): void {
    this.frames.push({ compressed, body: body.toString('latin1') });
  }
  onFrameTooLarge(size: number): void {
    this.tooLarge = size;
  }
}

describe('FrameDecoder', () => {
  const bodies = ['hello', '', 'x'.repeat(70_000), 'last'];
  const wire = Buffer.concat(bodies.map((b, i) => frame(Buffer.from(b, 'latin1'), i === 3 ? 1 : 0)));
  const expected = bodies.map((b, i) => ({ compressed: i === 3, body: b }));

  it('decodes the same messages whatever the chunking: whole, 1-byte chunks, and cuts at every prefix byte', () => {
    for (const size of [wire.length, 1, 2, 3, 4, 5, 6, 7, 4096]) {
      const d = new FrameDecoder(1 << 20);
      const sink = new Collect();
      for (let at = 0; at < wire.length; at += size) d.push(wire.subarray(at, at + size), sink);
      expect(sink.frames, `chunks of ${size}`).toEqual(expected);
      expect(d.partial).toBe(false);
    }
  });

  it('is partial inside a prefix or a body, and not between frames', () => {
    const d = new FrameDecoder(100);
    const sink = new Collect();
    d.push(Buffer.from([0, 0, 0]), sink);
    expect(d.partial).toBe(true);
    d.push(Buffer.from([0, 2, 0x61]), sink);
    expect(d.partial).toBe(true);
    d.push(Buffer.from([0x62]), sink);
    expect(d.partial).toBe(false);
    expect(sink.frames).toEqual([{ compressed: false, body: 'ab' }]);
  });

  it('refuses a prefix announcing more than the limit before keeping any of it, and stops', () => {
    const d = new FrameDecoder(10);
    const sink = new Collect();
    d.push(Buffer.concat([frame(Buffer.from('0123456789')), frame(Buffer.alloc(11)).subarray(0, 5)]), sink);
    expect(sink.frames).toEqual([{ compressed: false, body: '0123456789' }]);
    expect(sink.tooLarge).toBe(11);
    d.push(frame(Buffer.from('more')), sink);
    expect(sink.frames).toHaveLength(1);
  });
});

describe('parseGrpcTimeout', () => {
  it('reads every unit as milliseconds', () => {
    expect(parseGrpcTimeout('2H')).toBe(7_200_000);
    expect(parseGrpcTimeout('3M')).toBe(180_000);
    expect(parseGrpcTimeout('4S')).toBe(4000);
    expect(parseGrpcTimeout('250m')).toBe(250);
    expect(parseGrpcTimeout('1500u')).toBe(1.5);
    expect(parseGrpcTimeout('2000000n')).toBe(2);
    expect(parseGrpcTimeout('99999999S')).toBe(99_999_999_000);
  });

  it('refuses values that are not TimeoutValue TimeoutUnit', () => {
    for (const bad of ['', 'soon', '10', 'S', '123456789S', '10x', '-1S', '1.5S', '10 S 5']) expect(parseGrpcTimeout(bad), bad).toBeUndefined();
  });
});

describe('percentEncode (grpc-message)', () => {
  it('leaves printable ASCII without % as it is', () => {
    const s = 'session_id is required: see "docs" (a-z, 0-9) ~!@#$^&*';
    expect(percentEncode(s)).toBe(s);
  });

  it('encodes %, controls and the UTF-8 bytes of non-ASCII text, and decodes back', () => {
    const s = 'café 100% ✓\n😀';
    const e = percentEncode(s);
    expect(e).toBe('caf%C3%A9 100%25 %E2%9C%93%0A%F0%9F%98%80');
    expect(decodeURIComponent(e)).toBe(s);
  });
});

describe('CallEvents (the calls\' event surface)', () => {
  it('runs listeners in order, once listeners once, removes with off, and throws an unhandled error', async () => {
    const { CallEvents } = await import('../../src/server/native/call-events.js');
    const e = new CallEvents();
    const seen: string[] = [];
    const a = (x: unknown): void => { seen.push(`a${String(x)}`); };
    e.on('drain', a);
    e.once('drain', (x) => seen.push(`once${String(x)}`));
    e.on('close', () => seen.push('close'));
    expect(e.listenerCount('drain')).toBe(2);
    expect(e.emit('drain', 1)).toBe(true);
    expect(e.emit('drain', 2)).toBe(true);
    e.off('drain', a);
    expect(e.emit('drain', 3)).toBe(false);
    e.emit('close');
    expect(seen).toEqual(['a1', 'once1', 'a2', 'close']);
    expect(() => e.emit('error', new Error('boom'))).toThrow('boom');
    e.on('error', (err) => seen.push((err as Error).message));
    expect(e.emit('error', new Error('handled'))).toBe(true);
    expect(seen.at(-1)).toBe('handled');
  });
});
