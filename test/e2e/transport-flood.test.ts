/**
 * The HTTP/2 resource attacks of issue #31 against the running server's gRPC port (a child
 * process, so its memory is its own): hand-built frames on a plain TCP socket after the client
 * preface and SETTINGS.
 *
 * (a) HEADERS without END_HEADERS, then a flood of zero-length CONTINUATION frames (the
 *     CVE-2024-27316 class: the hand-written stack capped header-block bytes, which these frames
 *     do not carry, and grew to 1.4 GiB on 100 MB of them);
 * (b) the same with one-byte CONTINUATION frames, on 200 connections at once;
 * (c) a PING flood and a SETTINGS flood on 60 connections from peers that never read (their
 *     sockets paused), so every ACK the server owes stays queued on the server.
 *
 * What @grpc/grpc-js does, through node:http2 and nghttp2 (1.61 in Node 20.20): nghttp2 accepts
 * a bounded number of CONTINUATION frames per header block (nghttp2_option_set_max_continuations,
 * added for CVE-2024-27316) and ends the connection on the first one past it (measured: a
 * GOAWAY with INTERNAL_ERROR), and it counts the ACKs (PING/SETTINGS)
 * it has queued but not sent: past its budget (max_outbound_ack) it treats the peer as a flood
 * and the connection is dropped. Measured on the 2-core machine: (a) +0.4 MiB RSS; (b) +7-9 MiB,
 * another client's slowest round trip 0.4 s; (c) +2-3 MiB, 0.3 s. Each attack here checks that
 * the server's RSS grows by less than 100 MiB, that every attacking connection is ended by the
 * server, that it stays up, and that another client on its own connection is answered within a
 * few seconds while the flood runs.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials } from '@grpc/grpc-js';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';
import { api, type Api } from '../support/e2e.js';
import { FRAME, h2Frame, h2Frames, PREFACE } from '../support/raw-grpc.js';

let srv: ServerProcess;
let dir: string;
let client: SessionServiceClient;
let a: Api;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'palimpsest-flood-'));
  srv = await spawnServer(['--db', join(dir, 'flood.db')]);
  client = new SessionServiceClient(srv.address, credentials.createInsecure());
  a = api(client);
  await a.createSession({ sessionId: 'probe' });
});
afterAll(async () => {
  client?.close();
  if (srv && srv.proc.exitCode === null) {
    srv.proc.kill('SIGTERM');
    await srv.exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The server process's resident set, MiB (VmRSS of /proc/<pid>/status). */
function rssMiB(): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${srv.proc.pid!}/status`, 'utf8'));
  if (!m) throw new Error('no VmRSS');
  return Number(m[1]) / 1024;
}

const MAX_MS = 6_000;
const RSS_BOUND_MIB = 100;
const PROBE_BOUND_MS = 3_000;

interface Attack {
  /** Bytes the attacker wrote. */
  sent: number;
  /** How it ended: the server closed/reset the connection, or the attacker hit its byte or time limit. */
  end: 'closed' | 'bytes' | 'time';
  /** Frames the server sent (when the attacker reads). */
  frames: ReturnType<typeof h2Frames>;
}

/**
 * One attacker connection: the preface, an empty SETTINGS and `opening`, then `unit` (a buffer
 * of repeated frames) again and again until `maxBytes`, MAX_MS or the server ends the connection.
 * With `read: false` the socket is paused from the start: the attacker never reads a byte.
 */
async function attack(opening: Buffer, unit: Buffer, read: boolean, maxBytes: number, started: number): Promise<Attack> {
  const socket: Socket = connect(Number(srv.address.slice(srv.address.lastIndexOf(':') + 1)), '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let closed = false;
  const received: Buffer[] = [];
  socket.on('error', () => { closed = true; });
  socket.on('close', () => { closed = true; });
  if (read) socket.on('data', (d: Buffer) => received.push(d));
  else socket.pause();
  let sent = 0;
  let end: Attack['end'] = 'time';
  try {
    socket.write(Buffer.concat([PREFACE, h2Frame(FRAME.SETTINGS, 0, 0), opening]));
    for (;;) {
      if (closed) { end = 'closed'; break; }
      if (sent >= maxBytes) { end = 'bytes'; break; }
      if (Date.now() - started > MAX_MS) { end = 'time'; break; }
      sent += unit.length;
      if (!socket.write(unit)) {
        // Wait for the server to read, to end the connection, or for the time limit.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.max(0, MAX_MS - (Date.now() - started)));
          function done(): void {
            clearTimeout(timer);
            socket.off('drain', done).off('close', done);
            resolve();
          }
          socket.once('drain', done).once('close', done);
        });
      } else {
        // Let the socket's events (a close, an error) through between writes.
        await new Promise((r) => setImmediate(r));
      }
    }
    if (end === 'bytes') {
      // The bytes may still sit in the socket buffers: give the server the rest of the time to
      // end the connection. A peer that never reads notices only on a write (EPIPE/ECONNRESET),
      // so it sends one more PING every 100 ms.
      while (!closed && Date.now() - started < MAX_MS) {
        if (!read) socket.write(h2Frame(FRAME.PING, 0, 0, Buffer.alloc(8)));
        await new Promise((r) => setTimeout(r, 100));
      }
      if (closed) end = 'closed';
    }
  } finally {
    socket.destroy();
  }
  return { sent, end, frames: h2Frames(Buffer.concat(received)) };
}

interface FloodResult {
  readonly attacks: Attack[];
  /** Peak RSS growth of the server during the flood, MiB. */
  readonly rssGrowth: number;
  /** Round trips of another client during the flood, and the slowest one, ms. */
  readonly probes: number;
  readonly slowestProbeMs: number;
}

/**
 * `connections` attackers at once (see attack), each up to `maxBytes`; meanwhile samples the
 * server's RSS and runs CreateSession + GetSession round trips on another connection.
 */
async function flood(opening: Buffer, unit: Buffer, o: { read: boolean; connections: number; maxBytes: number }): Promise<FloodResult> {
  const base = rssMiB();
  let peak = base;
  const sampler = setInterval(() => { peak = Math.max(peak, rssMiB()); }, 25);
  const started = Date.now();
  let flooding = true;
  const probes = (async () => {
    let n = 0;
    let slowest = 0;
    while (flooding || n === 0) {
      const t0 = Date.now();
      await a.createSession({ sessionId: `probe-${Date.now()}-${n}` });
      await a.getSession({ sessionId: 'probe' });
      slowest = Math.max(slowest, Date.now() - t0);
      n++;
    }
    return { n, slowest };
  })();
  let attacks: Attack[];
  try {
    attacks = await Promise.all(Array.from({ length: o.connections }, () => attack(opening, unit, o.read, o.maxBytes, started)));
  } finally {
    flooding = false;
  }
  const p = await probes;
  clearInterval(sampler);
  peak = Math.max(peak, rssMiB());
  return { attacks, rssGrowth: peak - base, probes: p.n, slowestProbeMs: p.slowest };
}

/** A frame repeated until the buffer is about `size` bytes. */
function repeated(frame: Buffer, size = 256 * 1024): Buffer {
  return Buffer.concat(Array.from({ length: Math.ceil(size / frame.length) }, () => frame));
}

/** HEADERS for stream 1 without END_HEADERS: the start of a header block (:method POST, :scheme http). */
const OPEN_HEADER_BLOCK = h2Frame(FRAME.HEADERS, 0, 1, Buffer.from([0x83, 0x86]));

function goawayCodes(r: Attack): number[] {
  return r.frames.filter((f) => f.type === FRAME.GOAWAY).map((f) => f.payload.readUInt32BE(4));
}

/** The server is up and serves a new connection. */
async function stillServing(): Promise<void> {
  expect(srv.proc.exitCode).toBeNull();
  const fresh = new SessionServiceClient(srv.address, credentials.createInsecure());
  try {
    expect((await api(fresh).getSession({ sessionId: 'probe' })).session?.id).toBe('probe');
  } finally {
    fresh.close();
  }
}

/** Bounded memory, another client served meanwhile, the server still up. */
async function held(r: FloodResult): Promise<void> {
  expect(r.rssGrowth, 'server RSS growth, MiB').toBeLessThan(RSS_BOUND_MIB);
  expect(r.probes).toBeGreaterThan(0);
  expect(r.slowestProbeMs, 'slowest round trip of another client during the flood').toBeLessThan(PROBE_BOUND_MS);
  await stillServing();
}

describe('HTTP/2 floods against the gRPC port', () => {
  it('(a) one connection: HEADERS without END_HEADERS, then up to 20 MB of zero-length CONTINUATION frames', async () => {
    const r = await flood(OPEN_HEADER_BLOCK, repeated(h2Frame(FRAME.CONTINUATION, 0, 1)), { read: true, connections: 1, maxBytes: 20 * 1024 * 1024 });
    // The server ends the connection (nghttp2's CONTINUATION budget: a GOAWAY with
    // INTERNAL_ERROR, unless the RST of a socket closed with unread bytes overtakes it) long
    // before 20 MB reach it.
    expect(r.attacks[0]!.end).toBe('closed');
    expect(goawayCodes(r.attacks[0]!).filter((c) => c === 0)).toEqual([]);
    await held(r);
  });

  it('(b) one-byte CONTINUATION frames on 200 connections at once', async () => {
    const r = await flood(OPEN_HEADER_BLOCK, repeated(h2Frame(FRAME.CONTINUATION, 0, 1, Buffer.from([0x84])), 64 * 1024), { read: true, connections: 200, maxBytes: 1024 * 1024 });
    expect(r.attacks.map((x) => x.end).filter((e) => e !== 'closed')).toEqual([]);
    // Most see the GOAWAY; some are reset before they read it (the server closes a socket with
    // the attacker's bytes still unread, so the kernel answers with RST).
    expect(r.attacks.flatMap(goawayCodes).length).toBeGreaterThan(0);
    expect(r.attacks.flatMap(goawayCodes).filter((c) => c === 0)).toEqual([]);
    await held(r);
  });

  it('(c) a PING flood on 60 connections from peers that never read', async () => {
    const r = await flood(Buffer.alloc(0), repeated(h2Frame(FRAME.PING, 0, 0, Buffer.from('floodpng'))), { read: false, connections: 60, maxBytes: 2 * 1024 * 1024 });
    // A peer that reads nothing cannot see a GOAWAY: the server drops the connection (nghttp2's
    // outbound-ACK budget); it never queues megabytes of ACKs per peer.
    expect(r.attacks.map((x) => x.end).filter((e) => e !== 'closed')).toEqual([]);
    await held(r);
  });

  it('(c) a SETTINGS flood on 60 connections from peers that never read', async () => {
    // Each frame sets SETTINGS_INITIAL_WINDOW_SIZE = 65535 and must be applied and ACKed.
    const setting = Buffer.from([0x00, 0x04, 0x00, 0x00, 0xff, 0xff]);
    const r = await flood(Buffer.alloc(0), repeated(h2Frame(FRAME.SETTINGS, 0, 0, setting)), { read: false, connections: 60, maxBytes: 2 * 1024 * 1024 });
    expect(r.attacks.map((x) => x.end).filter((e) => e !== 'closed')).toEqual([]);
    await held(r);
  });
});
