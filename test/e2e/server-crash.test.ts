/**
 * Crash safety of the real server process: sustained appends from several clients, SIGKILL in the
 * middle, restart on the same database file. Every acknowledged append is there with its content,
 * no batch is half-written (all-or-nothing, checked by batch markers), seqs stay contiguous and the
 * served surface equals a replay of the served log; an import in progress leaves no session.
 * Three kills in one run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials } from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import { ImportOptions, SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import type { EventInput, SessionEvent } from '../../gen/palimpsest/v1/event.js';
import { input, replaceOp } from '../support/events.js';
import { allEvents, api, failure, fixture, replay, until, type Api } from '../support/e2e.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';

let dir: string;
const running: ServerProcess[] = [];
beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'palimpsest-crash-'));
}, 120_000);
afterAll(() => {
  for (const p of running) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

interface Marker {
  readonly b: string;
  readonly i: number;
  readonly n: number;
}

interface Ack {
  readonly sessionId: string;
  readonly b: string;
  readonly seqs: readonly number[];
  readonly types: readonly string[];
}

const SESSIONS = ['crash-a', 'crash-b'];

function connect(address: string): Api {
  return api(new SessionServiceClient(address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
}

/** Appends batches of 1-5 events until the server goes away; records every acknowledged batch. */
async function writer(c: Api, round: number, client: number, acks: Ack[], ends: string[]): Promise<void> {
  const lastUser = new Map<string, number>();
  for (let n = 0; ; n++) {
    const sessionId = SESSIONS[(client + n) % SESSIONS.length] as string;
    const b = `r${round}c${client}n${n}`;
    const size = 1 + ((n * 7 + client) % 5);
    const events: EventInput[] = [];
    const mine = lastUser.get(sessionId);
    for (let i = 0; i < size; i++) {
      const marker: Marker = { b, i, n: size };
      if (i === 0 && mine !== undefined && n % 4 === 3) {
        events.push(input('user/message', { id: `${b}-${i}`, role: 'user', content: [{ type: 'text', text: JSON.stringify(marker) }], source: { kind: 'user' } }, { surfaceOp: replaceOp(mine, mine), sourceEventSeqs: { seqs: [mine] } }));
      } else if (i % 2 === 0) {
        events.push(input('user/message', { id: `${b}-${i}`, role: 'user', content: [{ type: 'text', text: JSON.stringify(marker) }], source: { kind: 'user' } }, { surfaceOp: { $case: 'append', value: {} } }));
      } else {
        events.push(input('x/marker', marker));
      }
    }
    let seqs: number[];
    try {
      seqs = (await c.appendEvents({ sessionId, events })).seqs;
    } catch (e) {
      // The server was killed: this batch's outcome is unknown. Anything else is a bug.
      ends.push(`${(e as { code?: number }).code}: ${(e as Error).message}`);
      return;
    }
    acks.push({ sessionId, b, seqs, types: events.map((e) => e.type) });
    events.forEach((e, i) => { if (e.type === 'user/message') lastUser.set(sessionId, seqs[i] as number); });
  }
}

function markerOf(e: SessionEvent): Marker {
  const k = e.data?.kind;
  if (k?.$case !== 'json') throw new Error('json data expected');
  const d = JSON.parse(k.value);
  return e.type === 'x/marker' ? d : JSON.parse(d.content[0].text);
}

async function verify(c: Api, acks: readonly Ack[]): Promise<number> {
  let total = 0;
  for (const sessionId of SESSIONS) {
    const events = await allEvents(c, sessionId, 500);
    total += events.length;
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    const markers = events.map(markerOf);
    // All-or-nothing: each batch present is complete, in order, contiguous.
    const byBatch = new Map<string, number[]>();
    markers.forEach((m, seq) => byBatch.set(m.b, [...(byBatch.get(m.b) ?? []), seq]));
    for (const [b, seqs] of byBatch) {
      const n = markers[seqs[0] as number]?.n;
      expect(seqs.length, `batch ${b}`).toBe(n);
      seqs.forEach((s, i) => {
        expect(s).toBe((seqs[0] as number) + i);
        expect(markers[s]?.i).toBe(i);
      });
    }
    // Every acknowledged batch is there, at its acknowledged seqs, with its content.
    for (const a of acks.filter((x) => x.sessionId === sessionId)) {
      a.seqs.forEach((s, i) => {
        expect(markers[s], `acked ${a.b}[${i}] at seq ${s}`).toEqual({ b: a.b, i, n: a.seqs.length });
        expect(events[s]?.type).toBe(a.types[i]);
      });
    }
    const surface = await c.getSurface({ sessionId });
    expect(surface.seqs).toEqual(replay(events, sessionId).surface);
  }
  return total;
}

describe('crash safety', () => {
  it('SIGKILL mid-stream three times: acknowledged appends survive, batches are atomic, surface == replay', async () => {
    const db = join(dir, 'crash.db');
    const acks: Ack[] = [];
    let server = await spawnServer(['--db', db]);
    running.push(server);
    let c = connect(server.address);
    for (const id of SESSIONS) await c.createSession({ sessionId: id });
    let lastTotal = 0;
    for (let round = 0; round < 3; round++) {
      const before = acks.length;
      const ends: string[] = [];
      const writers = [0, 1, 2, 3].map((i) => {
        const wc = i === 0 ? c : connect(server.address);
        return writer(wc, round, i, acks, ends).finally(() => { if (wc !== c) wc.client.close(); });
      });
      // An import in progress (half a file sent, stream still open) when the server dies.
      const half = fixture('goal-multi-turn-actions.jsonl').subarray(0, 40_000);
      const importer = connect(server.address);
      const upload = importer.client.importSession(() => undefined);
      upload.write({ part: { $case: 'options', value: ImportOptions.fromPartial({ sessionId: `partial-${round}` }) } });
      upload.write({ part: { $case: 'chunk', value: half } });
      // The server has started that import (its pending row is in the file), so the restart
      // below really has to drop it.
      const peek = new Database(db, { readonly: true, fileMustExist: true });
      await until(() => peek.prepare('SELECT count(*) FROM sessions WHERE id = ?').pluck().get(`partial-${round}`) === 1, 'the import to start');
      peek.close();
      // Kill once appends are flowing (a different amount each round).
      await until(() => acks.length - before >= 40 + round * 25, 'appends to flow', 10_000);
      server.proc.kill('SIGKILL');
      expect((await server.exited).signal).toBe('SIGKILL');
      await Promise.all(writers);
      importer.client.close();

      expect(ends).toHaveLength(4);
      for (const e of ends) expect(e).toMatch(/^14: /);
      c.client.close();
      server = await spawnServer(['--db', db]);
      running.push(server);
      c = connect(server.address);
      const total = await verify(c, acks);
      // The interrupted import left nothing behind, and its id is free.
      expect((await failure(c.getSession({ sessionId: `partial-${round}` }))).reason).toBe('SESSION_NOT_FOUND');
      expect((await c.listSessions({})).sessions.map((x) => x.id).sort()).toEqual([...SESSIONS]);
      expect(total).toBeGreaterThan(lastTotal);
      lastTotal = total;
    }
    // A clean stop after the crashes exits 0 and leaves a database that opens again.
    server.proc.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    c.client.close();
    server = await spawnServer(['--db', db]);
    running.push(server);
    c = connect(server.address);
    expect(await verify(c, acks)).toBe(lastTotal);
    c.client.close();
    server.proc.kill('SIGTERM');
    await server.exited;
  }, 60_000);
});
