import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { encodedLengthBound, encodeHeaders, encodeHeadersInto, HpackDecoder, HpackError } from '../../src/server/http2/hpack.js';
import { rng } from '../support/rng.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

function decodeAll(d: HpackDecoder, block: Buffer): string[] {
  const out: string[] = [];
  d.decode(block, out, Number.MAX_SAFE_INTEGER);
  return out;
}

const listSize = (fields: readonly string[]): number => {
  let n = 0;
  for (let i = 0; i < fields.length; i += 2) n += fields[i]!.length + fields[i + 1]!.length + 32;
  return n;
};

/** The dynamic table, newest first, read back through indexed references (which do not change it). */
function dynamicTable(d: HpackDecoder): string[] {
  const entries: string[] = [];
  for (let index = 62; index < 127; index++) {
    try {
      entries.push(...decodeAll(d, Buffer.from([0x80 | index])));
    } catch (e) {
      expect(e).toBeInstanceOf(HpackError);
      return entries;
    }
  }
  throw new Error('dynamic table larger than the probe');
}

/** RFC 7541 5.1 integer with an `n`-bit prefix under `flags`. */
function int(value: number, n: number, flags = 0): number[] {
  const mask = (1 << n) - 1;
  if (value < mask) return [flags | value];
  const bytes = [flags | mask];
  let rest = value - mask;
  while (rest >= 128) {
    bytes.push((rest % 128) | 0x80);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return bytes;
}

/** A literal without indexing, new name, plain name and the given value octets (Huffman or not). */
function literal(name: string, value: Buffer, huffman: boolean): Buffer {
  return Buffer.concat([
    Buffer.from([0x00, ...int(name.length, 7)]),
    Buffer.from(name, 'latin1'),
    Buffer.from(int(value.length, 7, huffman ? 0x80 : 0)),
    value,
  ]);
}

type Series = { block: string; fields: string[]; table: string[] }[];

function runSeries(maxTableSize: number, series: Series): void {
  const d = new HpackDecoder(maxTableSize);
  for (const step of series) {
    const out: string[] = [];
    const size = d.decode(hex(step.block), out, Number.MAX_SAFE_INTEGER);
    expect(out).toEqual(step.fields);
    expect(size).toBe(listSize(step.fields));
    expect(dynamicTable(d)).toEqual(step.table);
  }
}

describe('HpackDecoder: RFC 7541 Appendix C', () => {
  it('C.2.1 literal with indexing adds the field to the dynamic table', () => {
    runSeries(4096, [{
      block: '400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572',
      fields: ['custom-key', 'custom-header'],
      table: ['custom-key', 'custom-header'],
    }]);
  });

  it('C.2.2 literal without indexing leaves the table empty', () => {
    runSeries(4096, [{ block: '040c 2f73 616d 706c 652f 7061 7468', fields: [':path', '/sample/path'], table: [] }]);
  });

  it('C.2.3 literal never indexed leaves the table empty', () => {
    runSeries(4096, [{ block: '1008 7061 7373 776f 7264 0673 6563 7265 74', fields: ['password', 'secret'], table: [] }]);
  });

  it('C.2.4 indexed field from the static table', () => {
    runSeries(4096, [{ block: '82', fields: [':method', 'GET'], table: [] }]);
  });

  const requests = (blocks: [string, string, string]): Series => [
    {
      block: blocks[0],
      fields: [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'www.example.com'],
      table: [':authority', 'www.example.com'],
    },
    {
      block: blocks[1],
      fields: [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'www.example.com', 'cache-control', 'no-cache'],
      table: ['cache-control', 'no-cache', ':authority', 'www.example.com'],
    },
    {
      block: blocks[2],
      fields: [':method', 'GET', ':scheme', 'https', ':path', '/index.html', ':authority', 'www.example.com', 'custom-key', 'custom-value'],
      table: ['custom-key', 'custom-value', 'cache-control', 'no-cache', ':authority', 'www.example.com'],
    },
  ];

  it('C.3 requests without Huffman share one dynamic table', () => {
    runSeries(4096, requests([
      '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
      '8286 84be 5808 6e6f 2d63 6163 6865',
      '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65',
    ]));
  });

  it('C.4 requests with Huffman share one dynamic table', () => {
    runSeries(4096, requests([
      '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
      '8286 84be 5886 a8eb 1064 9cbf',
      '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf',
    ]));
  });

  const date1 = 'Mon, 21 Oct 2013 20:13:21 GMT';
  const date2 = 'Mon, 21 Oct 2013 20:13:22 GMT';
  const location = 'https://www.example.com';
  const cookie = 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1';
  const responses = (blocks: [string, string, string]): Series => [
    {
      block: blocks[0],
      fields: [':status', '302', 'cache-control', 'private', 'date', date1, 'location', location],
      table: ['location', location, 'date', date1, 'cache-control', 'private', ':status', '302'],
    },
    {
      block: blocks[1],
      fields: [':status', '307', 'cache-control', 'private', 'date', date1, 'location', location],
      table: [':status', '307', 'location', location, 'date', date1, 'cache-control', 'private'],
    },
    {
      block: blocks[2],
      fields: [':status', '200', 'cache-control', 'private', 'date', date2, 'location', location, 'content-encoding', 'gzip', 'set-cookie', cookie],
      table: ['set-cookie', cookie, 'content-encoding', 'gzip', 'date', date2],
    },
  ];

  it('C.5 responses without Huffman evict from a 256-octet table', () => {
    runSeries(256, responses([
      `4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
       2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
       6c65 2e63 6f6d`,
      '4803 3330 37c1 c0bf',
      `88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
       54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
       5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
       3d31`,
    ]));
  });

  it('C.6 responses with Huffman evict from a 256-octet table', () => {
    runSeries(256, responses([
      `4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
       2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3`,
      '4883 640e ffc1 c0bf',
      `88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
       77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
       9587 3160 65c0 03ed 4ee5 b106 3d50 07`,
    ]));
  });
});

/**
 * RFC 7541 Appendix B as printed: [code, length] for symbols 0..255 and EOS. Kept apart from the
 * module's table (which stores lengths only and derives the codes) so each checks the other.
 */
// prettier-ignore
const RFC_HUFFMAN: readonly (readonly [number, number])[] = [
  [0x1ff8, 13], [0x7fffd8, 23], [0xfffffe2, 28], [0xfffffe3, 28], [0xfffffe4, 28], [0xfffffe5, 28], [0xfffffe6, 28], [0xfffffe7, 28],
  [0xfffffe8, 28], [0xffffea, 24], [0x3ffffffc, 30], [0xfffffe9, 28], [0xfffffea, 28], [0x3ffffffd, 30], [0xfffffeb, 28], [0xfffffec, 28],
  [0xfffffed, 28], [0xfffffee, 28], [0xfffffef, 28], [0xffffff0, 28], [0xffffff1, 28], [0xffffff2, 28], [0x3ffffffe, 30], [0xffffff3, 28],
  [0xffffff4, 28], [0xffffff5, 28], [0xffffff6, 28], [0xffffff7, 28], [0xffffff8, 28], [0xffffff9, 28], [0xffffffa, 28], [0xffffffb, 28],
  [0x14, 6], [0x3f8, 10], [0x3f9, 10], [0xffa, 12], [0x1ff9, 13], [0x15, 6], [0xf8, 8], [0x7fa, 11],
  [0x3fa, 10], [0x3fb, 10], [0xf9, 8], [0x7fb, 11], [0xfa, 8], [0x16, 6], [0x17, 6], [0x18, 6],
  [0x0, 5], [0x1, 5], [0x2, 5], [0x19, 6], [0x1a, 6], [0x1b, 6], [0x1c, 6], [0x1d, 6],
  [0x1e, 6], [0x1f, 6], [0x5c, 7], [0xfb, 8], [0x7ffc, 15], [0x20, 6], [0xffb, 12], [0x3fc, 10],
  [0x1ffa, 13], [0x21, 6], [0x5d, 7], [0x5e, 7], [0x5f, 7], [0x60, 7], [0x61, 7], [0x62, 7],
  [0x63, 7], [0x64, 7], [0x65, 7], [0x66, 7], [0x67, 7], [0x68, 7], [0x69, 7], [0x6a, 7],
  [0x6b, 7], [0x6c, 7], [0x6d, 7], [0x6e, 7], [0x6f, 7], [0x70, 7], [0x71, 7], [0x72, 7],
  [0xfc, 8], [0x73, 7], [0xfd, 8], [0x1ffb, 13], [0x7fff0, 19], [0x1ffc, 13], [0x3ffc, 14], [0x22, 6],
  [0x7ffd, 15], [0x3, 5], [0x23, 6], [0x4, 5], [0x24, 6], [0x5, 5], [0x25, 6], [0x26, 6],
  [0x27, 6], [0x6, 5], [0x74, 7], [0x75, 7], [0x28, 6], [0x29, 6], [0x2a, 6], [0x7, 5],
  [0x2b, 6], [0x76, 7], [0x2c, 6], [0x8, 5], [0x9, 5], [0x2d, 6], [0x77, 7], [0x78, 7],
  [0x79, 7], [0x7a, 7], [0x7b, 7], [0x7ffe, 15], [0x7fc, 11], [0x3ffd, 14], [0x1ffd, 13], [0xffffffc, 28],
  [0xfffe6, 20], [0x3fffd2, 22], [0xfffe7, 20], [0xfffe8, 20], [0x3fffd3, 22], [0x3fffd4, 22], [0x3fffd5, 22], [0x7fffd9, 23],
  [0x3fffd6, 22], [0x7fffda, 23], [0x7fffdb, 23], [0x7fffdc, 23], [0x7fffdd, 23], [0x7fffde, 23], [0xffffeb, 24], [0x7fffdf, 23],
  [0xffffec, 24], [0xffffed, 24], [0x3fffd7, 22], [0x7fffe0, 23], [0xffffee, 24], [0x7fffe1, 23], [0x7fffe2, 23], [0x7fffe3, 23],
  [0x7fffe4, 23], [0x1fffdc, 21], [0x3fffd8, 22], [0x7fffe5, 23], [0x3fffd9, 22], [0x7fffe6, 23], [0x7fffe7, 23], [0xffffef, 24],
  [0x3fffda, 22], [0x1fffdd, 21], [0xfffe9, 20], [0x3fffdb, 22], [0x3fffdc, 22], [0x7fffe8, 23], [0x7fffe9, 23], [0x1fffde, 21],
  [0x7fffea, 23], [0x3fffdd, 22], [0x3fffde, 22], [0xfffff0, 24], [0x1fffdf, 21], [0x3fffdf, 22], [0x7fffeb, 23], [0x7fffec, 23],
  [0x1fffe0, 21], [0x1fffe1, 21], [0x3fffe0, 22], [0x1fffe2, 21], [0x7fffed, 23], [0x3fffe1, 22], [0x7fffee, 23], [0x7fffef, 23],
  [0xfffea, 20], [0x3fffe2, 22], [0x3fffe3, 22], [0x3fffe4, 22], [0x7ffff0, 23], [0x3fffe5, 22], [0x3fffe6, 22], [0x7ffff1, 23],
  [0x3ffffe0, 26], [0x3ffffe1, 26], [0xfffeb, 20], [0x7fff1, 19], [0x3fffe7, 22], [0x7ffff2, 23], [0x3fffe8, 22], [0x1ffffec, 25],
  [0x3ffffe2, 26], [0x3ffffe3, 26], [0x3ffffe4, 26], [0x7ffffde, 27], [0x7ffffdf, 27], [0x3ffffe5, 26], [0xfffff1, 24], [0x1ffffed, 25],
  [0x7fff2, 19], [0x1fffe3, 21], [0x3ffffe6, 26], [0x7ffffe0, 27], [0x7ffffe1, 27], [0x3ffffe7, 26], [0x7ffffe2, 27], [0xfffff2, 24],
  [0x1fffe4, 21], [0x1fffe5, 21], [0x3ffffe8, 26], [0x3ffffe9, 26], [0xffffffd, 28], [0x7ffffe3, 27], [0x7ffffe4, 27], [0x7ffffe5, 27],
  [0xfffec, 20], [0xfffff3, 24], [0xfffed, 20], [0x1fffe6, 21], [0x3fffe9, 22], [0x1fffe7, 21], [0x1fffe8, 21], [0x7ffff3, 23],
  [0x3fffea, 22], [0x3fffeb, 22], [0x1ffffee, 25], [0x1ffffef, 25], [0xfffff4, 24], [0xfffff5, 24], [0x3ffffea, 26], [0x7ffff4, 23],
  [0x3ffffeb, 26], [0x7ffffe6, 27], [0x3ffffec, 26], [0x3ffffed, 26], [0x7ffffe7, 27], [0x7ffffe8, 27], [0x7ffffe9, 27], [0x7ffffea, 27],
  [0x7ffffeb, 27], [0xffffffe, 28], [0x7ffffec, 27], [0x7ffffed, 27], [0x7ffffee, 27], [0x7ffffef, 27], [0x7fffff0, 27], [0x3ffffee, 26],
  [0x3fffffff, 30],
];

/** Huffman-encodes octets with RFC_HUFFMAN, padding with 1s (RFC 7541 5.2). */
function huffmanEncode(octets: Uint8Array): Buffer {
  const out: number[] = [];
  let acc = 0; // pending bits, at most 7 + 30 < 53
  let bits = 0;
  for (const octet of octets) {
    const [code, length] = RFC_HUFFMAN[octet]!;
    acc = acc * 2 ** length + code;
    bits += length;
    while (bits >= 8) {
      bits -= 8;
      const scale = 2 ** bits;
      out.push(Math.floor(acc / scale));
      acc %= scale;
    }
  }
  if (bits > 0) out.push(acc * 2 ** (8 - bits) + (2 ** (8 - bits) - 1));
  return Buffer.from(out);
}


describe('HpackDecoder: Huffman', () => {
  it('the RFC code table satisfies Kraft equality and is prefix-free', () => {
    expect(RFC_HUFFMAN).toHaveLength(257);
    let kraft = 0;
    for (const [, length] of RFC_HUFFMAN) kraft += 2 ** -length;
    expect(kraft).toBe(1);
    const seen = new Set<string>();
    for (const [code, length] of RFC_HUFFMAN) seen.add(code.toString(2).padStart(length, '0'));
    for (const word of seen) for (let k = 1; k < word.length; k++) expect(seen.has(word.slice(0, k))).toBe(false);
  });

  it('decodes 2000 random octet strings as an independent encoder wrote them', () => {
    const random = rng(7541);
    const d = new HpackDecoder();
    for (let n = 0; n < 2000; n++) {
      const octets = Buffer.alloc(Math.floor(random() * 301));
      for (let k = 0; k < octets.length; k++) octets[k] = Math.floor(random() * 256);
      const out: string[] = [];
      d.decode(literal('x', huffmanEncode(octets), true), out, Number.MAX_SAFE_INTEGER);
      expect(out).toEqual(['x', octets.toString('latin1')]);
    }
  });

  it('decodes every single symbol, the longest codes included', () => {
    const d = new HpackDecoder();
    for (let octet = 0; octet < 256; octet++) {
      const value = Buffer.from([octet, octet, octet]);
      expect(decodeAll(d, literal('x', huffmanEncode(value), true))).toEqual(['x', value.toString('latin1')]);
    }
  });
});

type Frame = { type: number; flags: number; streamId: number; payload: Buffer };

/**
 * A raw TCP peer for node:http2's client (nghttp2): answers its SETTINGS and collects the header
 * block of every request, in arrival order, until `count` blocks have arrived.
 */
async function captureHeaderBlocks(
  send: (session: http2.ClientHttp2Session) => void,
  count: number,
  options: http2.ClientSessionOptions,
): Promise<{ blocks: { streamId: number; block: Buffer }[]; frames: Frame[] }> {
  const blocks: { streamId: number; block: Buffer }[] = [];
  const frames: Frame[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const server = net.createServer((socket) => {
    let buf = Buffer.alloc(0);
    let preface = false;
    let pending: Buffer[] = [];
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (!preface) {
        if (buf.length < 24) return;
        expect(buf.subarray(0, 24).toString('latin1')).toBe('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
        buf = buf.subarray(24);
        preface = true;
      }
      while (buf.length >= 9) {
        const length = buf.readUIntBE(0, 3);
        if (buf.length < 9 + length) break;
        const frame = { type: buf[3]!, flags: buf[4]!, streamId: buf.readUInt32BE(5) & 0x7fffffff, payload: buf.subarray(9, 9 + length) };
        buf = buf.subarray(9 + length);
        frames.push(frame);
        if (frame.type === 0x4 && (frame.flags & 0x1) === 0) {
          // Our (empty) SETTINGS, then the ACK of the client's.
          socket.write(Buffer.from([0, 0, 0, 0x4, 0, 0, 0, 0, 0, 0, 0, 0, 0x4, 0x1, 0, 0, 0, 0]));
        } else if (frame.type === 0x1) {
          let fragment = frame.payload;
          if (frame.flags & 0x8) fragment = fragment.subarray(1, fragment.length - fragment[0]!);
          if (frame.flags & 0x20) fragment = fragment.subarray(5);
          pending = [fragment];
        } else if (frame.type === 0x9) {
          pending.push(frame.payload);
        } else {
          continue;
        }
        if ((frame.type === 0x1 || frame.type === 0x9) && frame.flags & 0x4) {
          blocks.push({ streamId: frame.streamId, block: Buffer.concat(pending) });
          if (blocks.length === count) done();
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const session = http2.connect(`http://127.0.0.1:${port}`, options);
  session.on('error', () => {});
  try {
    send(session);
    await finished;
  } finally {
    session.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  return { blocks, frames };
}

const randomAscii = (random: () => number, length: number): string => {
  let s = '';
  // Visible ASCII only: nghttp2 passes values through, but leading/trailing spaces are not ours to test.
  for (let k = 0; k < length; k++) s += String.fromCharCode(0x21 + Math.floor(random() * 94));
  return s;
};

describe('HpackDecoder against nghttp2 (node:http2 client)', () => {
  it('decodes the header blocks of a connection with Huffman, the dynamic table and CONTINUATION', async () => {
    const random = rng(9113);
    let printable = '';
    for (let c = 0x21; c <= 0x7e; c++) printable += String.fromCharCode(c);
    for (let c = 0x80; c <= 0xff; c++) printable += String.fromCharCode(c);
    printable = `a ${printable} z`;
    const grpc = { ':method': 'POST', ':path': '/palimpsest.v1.SessionLog/Append', 'content-type': 'application/grpc', te: 'trailers', 'user-agent': 'grpc-node-js/1.14.7' };
    const requests: { headers: Record<string, string>; options?: http2.ClientSessionRequestOptions }[] = [
      { headers: { ...grpc, 'grpc-timeout': '9999m', 'x-long': randomAscii(random, 1000), 'x-repeat': 'same-value', 'x-printable': printable } },
      { headers: { ...grpc, 'grpc-timeout': '9998m', 'x-long': randomAscii(random, 700), 'x-repeat': 'same-value', 'x-trace-bin': randomBytes(48).toString('base64') } },
      { headers: { ...grpc, 'x-repeat': 'same-value' }, options: { weight: 42 } },
      { headers: Object.fromEntries(Array.from({ length: 120 }, (_, k) => [`x-many-${k}`, randomAscii(random, 200)])) },
      { headers: { ...grpc, 'x-repeat': 'same-value', 'x-printable': printable } },
      { headers: { ...grpc, 'x-repeat': 'same-value', 'x-printable': printable } },
    ];
    const sent = new Map<number, Record<string, string>>();
    const { blocks, frames } = await captureHeaderBlocks(
      (session) => {
        // Client streams are numbered 1, 3, 5, ... in request order (the id is assigned later).
        requests.forEach(({ headers, options }, k) => {
          session.request(headers, options).on('error', () => {});
          sent.set(1 + 2 * k, headers);
        });
      },
      requests.length,
      { paddingStrategy: http2.constants.PADDING_STRATEGY_MAX },
    );
    // The wire features the test means to cover did occur.
    expect(frames.some((f) => f.type === 0x9)).toBe(true);
    expect(frames.some((f) => f.type === 0x1 && f.flags & 0x8)).toBe(true);
    expect(frames.some((f) => f.type === 0x1 && f.flags & 0x20)).toBe(true);

    const d = new HpackDecoder(4096);
    for (const { streamId, block } of blocks) {
      const out: string[] = [];
      const size = d.decode(block, out, Number.MAX_SAFE_INTEGER);
      expect(size).toBe(listSize(out));
      const got = new Map<string, string>();
      for (let i = 0; i < out.length; i += 2) got.set(out[i]!, out[i + 1]!);
      const headers = sent.get(streamId);
      expect(headers).toBeDefined();
      expect(got.get(':scheme')).toBe('http');
      expect(got.get(':authority')).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(got.get(':method')).toBe(headers![':method'] ?? 'GET');
      expect(got.get(':path')).toBe(headers![':path'] ?? '/');
      for (const [name, value] of Object.entries(headers!)) expect([name, got.get(name)]).toEqual([name, value]);
    }
    // The last request is references into the dynamic table but for :path, which nghttp2 never
    // indexes (~25 octets); as literals its x-printable value alone would take ~100.
    expect(blocks.at(-1)!.block.length).toBeLessThan(40);
  });
});

describe('HpackDecoder: malformed blocks', () => {
  const cases: [string, Buffer, RegExp][] = [
    ['truncated integer', Buffer.from([0xff]), /truncated integer/],
    ['truncated integer continuation', Buffer.from([0xff, 0x80]), /truncated integer/],
    ['index 0', Buffer.from([0x80]), /index 0/],
    ['index beyond an empty dynamic table', Buffer.from([0x80 | 62]), /beyond the table/],
    ['name index beyond the table', Buffer.from([...int(62, 4), 0x01, 0x61]), /beyond the table/],
    ['index beyond a one-entry table', Buffer.concat([hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572'), Buffer.from([0x80 | 63])]), /beyond the table/],
    ['table size update above the maximum', Buffer.from(int(4097, 5, 0x20)), /exceeds the advertised 4096/],
    ['table size update after a field', Buffer.from([0x82, 0x20]), /after a header field/],
    ['integer overflow', Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]), /integer overflow/],
    ['integer with too many octets', Buffer.from([0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]), /integer overflow/],
    ['string longer than the block', Buffer.from([0x00, 0x05, 0x61]), /overruns/],
    ['string length missing', Buffer.from([0x40]), /truncated string/],
    ['value missing', Buffer.from([0x00, 0x01, 0x61]), /truncated string/],
    ['huge string length', Buffer.from([0x00, 0x01, 0x61, ...int(2 ** 31 - 1, 7)]), /overruns/],
    ['Huffman EOS', literal('x', Buffer.from([0xff, 0xff, 0xff, 0xff]), true), /EOS/],
    ['Huffman EOS after a symbol', literal('x', Buffer.from([0x1f, 0xff, 0xff, 0xff, 0xff]), true), /EOS/],
    ['Huffman padding of 8 bits', literal('x', Buffer.from([0xff]), true), /padding/],
    ['Huffman padding of 11 bits', literal('x', Buffer.from([0x1f, 0xff]), true), /padding/],
    ['Huffman padding with 0 bits', literal('x', Buffer.from([0x18]), true), /padding/],
  ];
  for (const [what, block, message] of cases) {
    it(`rejects ${what}`, () => {
      const d = new HpackDecoder(4096);
      expect(() => d.decode(block, [], Number.MAX_SAFE_INTEGER)).toThrow(HpackError);
      expect(() => new HpackDecoder(4096).decode(block, [], Number.MAX_SAFE_INTEGER)).toThrow(message);
      expect(decodeAll(new HpackDecoder(4096), hex('8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff'))).toEqual([
        ':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'www.example.com',
      ]);
    });
  }

  it('accepts the limits themselves', () => {
    const d = new HpackDecoder(4096);
    // Two size updates at the start (down, then to the maximum), then a field.
    expect(decodeAll(d, Buffer.from([...int(0, 5, 0x20), ...int(4096, 5, 0x20), 0x82]))).toEqual([':method', 'GET']);
    // 7 bits of padding; an empty Huffman string.
    expect(decodeAll(d, literal('x', Buffer.from([0x1f]), true))).toEqual(['x', 'a']);
    expect(decodeAll(d, literal('x', Buffer.alloc(0), true))).toEqual(['x', '']);
    // Index 61 is the last static entry; a redundant but bounded integer encoding decodes.
    expect(decodeAll(d, Buffer.from([0x80 | 61]))).toEqual(['www-authenticate', '']);
    expect(decodeAll(d, Buffer.from([0x3f, 0x80, 0x80, 0x80, 0x80, 0x00, 0x82]))).toEqual([':method', 'GET']);
  });

  it('a size update to 0 empties the table', () => {
    const d = new HpackDecoder(4096);
    decodeAll(d, hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572'));
    expect(dynamicTable(d)).toEqual(['custom-key', 'custom-header']);
    decodeAll(d, Buffer.from([0x20]));
    expect(dynamicTable(d)).toEqual([]);
  });

  it('an entry larger than the table empties it and is not added', () => {
    const d = new HpackDecoder(64);
    decodeAll(d, Buffer.from([0x40, 0x01, 0x61, 0x01, 0x62]));
    expect(dynamicTable(d)).toEqual(['a', 'b']);
    expect(decodeAll(d, Buffer.concat([Buffer.from([0x40, 0x01, 0x63]), Buffer.from([0x20]), Buffer.alloc(32, 0x64)]))).toEqual(['c', 'd'.repeat(32)]);
    expect(dynamicTable(d)).toEqual([]);
  });

  it('the ring keeps the newest entries across many insertions and wrap-arounds', () => {
    const d = new HpackDecoder(4096);
    const expected: string[] = [];
    for (let n = 0; n < 1000; n++) {
      const value = 'v'.repeat(n % 50) + String(n);
      decodeAll(d, literal('x', Buffer.from(value), false).fill(0x40, 0, 1));
      expected.unshift('x', value);
      let size = listSize(expected);
      while (size > 4096) {
        expected.splice(-2);
        size = listSize(expected);
      }
    }
    expect(dynamicTable(d)).toEqual(expected);
  });
});

describe('HpackDecoder: unindexed values repeat through a cache of raw octets', () => {
  it('keeps plain and Huffman strings with the same octets apart', () => {
    const d = new HpackDecoder();
    const plain = Buffer.concat([Buffer.from([0x04]), literal('', Buffer.from([0x1f]), false).subarray(2)]);
    const huffman = Buffer.concat([Buffer.from([0x04]), literal('', Buffer.from([0x1f]), true).subarray(2)]);
    for (let n = 0; n < 3; n++) {
      expect(decodeAll(d, plain)).toEqual([':path', '\x1f']);
      expect(decodeAll(d, huffman)).toEqual([':path', 'a']);
    }
  });

  it('returns the right value when many values compete for the slots', () => {
    const random = rng(42);
    const values: Buffer[] = [];
    for (let k = 0; k < 64; k++) {
      if (k % 2 === 1) {
        // The twin of the previous value: same length and slot, only the last octet differs.
        const twin = Buffer.from(values[k - 1]!);
        twin[twin.length - 1] = twin[twin.length - 1]! ^ 0x08;
        values.push(twin);
        continue;
      }
      const octets = Buffer.alloc(1 + Math.floor(random() * 140));
      for (let i = 0; i < octets.length; i++) octets[i] = Math.floor(random() * 256);
      values.push(octets);
    }
    const d = new HpackDecoder();
    for (let n = 0; n < 5000; n++) {
      const octets = values[Math.floor(random() * values.length)]!;
      const huffman = random() < 0.5;
      const value = huffman ? huffmanEncode(octets) : octets;
      const block = Buffer.concat([Buffer.from([0x14]), Buffer.from(int(value.length, 7, huffman ? 0x80 : 0)), value]);
      expect(decodeAll(d, block)).toEqual([':path', octets.toString('latin1')]);
    }
  });
});

describe('HpackDecoder: maxListSize', () => {
  it('stops appending past the limit, reports the full size and keeps the table in sync', () => {
    const d = new HpackDecoder(4096);
    const big = 'b'.repeat(100);
    const block = Buffer.concat([
      Buffer.from([0x82]), // :method GET, 42 octets
      Buffer.from([0x40, 0x05]), Buffer.from('x-big'), Buffer.from([big.length]), Buffer.from(big), // 137 octets, indexed
      Buffer.from([0x84]), // :path /, 38 octets
    ]);
    const out: string[] = [];
    const size = d.decode(block, out, 100);
    expect(size).toBe(42 + 137 + 38);
    expect(out).toEqual([':method', 'GET']);
    expect(decodeAll(d, Buffer.from([0x80 | 62, 0x82]))).toEqual(['x-big', big, ':method', 'GET']);
    expect(d.decode(Buffer.from([0x80 | 62]), out, 137)).toBe(137);
    expect(out).toEqual(['x-big', big]);
    // A shorter block into the same array leaves nothing of the longer one behind.
    d.decode(Buffer.from([0x82, 0x84, 0x86]), out, 1000);
    d.decode(Buffer.from([0x87]), out, 1000);
    expect(out).toEqual([':scheme', 'https']);
  });
});

describe('encodeHeaders', () => {
  it('round-trips through HpackDecoder without touching the dynamic table', () => {
    let latin1 = '\t';
    for (let c = 0x20; c <= 0xff; c++) latin1 += String.fromCharCode(c);
    const fields = [
      ':status', '200',
      ':status', '404',
      ':status', '503',
      'content-type', 'application/grpc',
      'accept-encoding', 'gzip, deflate',
      'accept-encoding', 'identity',
      'grpc-status', '0',
      'grpc-message', latin1,
      'x-empty', '',
      'grpc-status-details-bin', 'A'.repeat(20_000),
      'x-'.padEnd(300, 'n'), 'long name',
    ];
    const block = encodeHeaders(fields);
    expect(block.length).toBeLessThanOrEqual(encodedLengthBound(fields));
    const d = new HpackDecoder(4096);
    const out: string[] = [];
    expect(d.decode(block, out, Number.MAX_SAFE_INTEGER)).toBe(listSize(fields));
    expect(out).toEqual(fields);
    expect(dynamicTable(d)).toEqual([]);
  });

  it('uses the static table and plain literals', () => {
    expect(encodeHeaders([':status', '200'])).toEqual(Buffer.from([0x88]));
    expect(encodeHeaders([':status', '404'])).toEqual(Buffer.from([0x8d]));
    expect(encodeHeaders([':status', '503'])).toEqual(Buffer.from([0x08, 0x03, 0x35, 0x30, 0x33]));
    expect(encodeHeaders(['content-type', 'a'])).toEqual(Buffer.from([0x0f, 0x10, 0x01, 0x61]));
    expect(encodeHeaders(['x-a', 'hello'])).toEqual(Buffer.concat([Buffer.from([0x00, 0x03]), Buffer.from('x-a'), Buffer.from([0x05]), Buffer.from('hello')]));
    expect(encodeHeaders([])).toEqual(Buffer.alloc(0));
  });

  it('encodeHeadersInto writes at an offset and returns the end', () => {
    const fields = [':status', '200', 'content-type', 'application/grpc', 'grpc-accept-encoding', 'identity'];
    const target = Buffer.alloc(7 + encodedLengthBound(fields), 0xee);
    const end = encodeHeadersInto(fields, target, 7);
    expect(target.subarray(0, 7)).toEqual(Buffer.alloc(7, 0xee));
    expect(target.subarray(7, end)).toEqual(encodeHeaders(fields));
  });

  const invalid: [string, string[]][] = [
    ['an uppercase name', ['Content-Type', 'x']],
    ['an empty name', ['', 'x']],
    ['a name with a space', ['x y', 'x']],
    ['a name with CR', ['x\r', 'x']],
    ['a name with a char above 255', ['x\u0100', 'x']],
    ['a value with LF', ['x', 'a\nb']],
    ['a value with CR', ['x', 'a\rb']],
    ['a value with NUL', ['x', 'a\0b']],
    ['a value with a char above 255', ['x', 'a\u0100']],
    ['a value with CR after a static name', ['content-type', 'a\rb']],
    ['an odd number of strings', ['x']],
  ];
  for (const [what, fields] of invalid) {
    it(`throws TypeError for ${what}`, () => {
      expect(() => encodeHeaders(fields)).toThrow(TypeError);
    });
  }
});
