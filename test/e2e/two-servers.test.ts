/**
 * Two `palimpsest serve` processes on one SQLite file (the multi-process deployment the store
 * port promises; also what a zero-downtime restart looks like): a subscriber on one process hears
 * the other's commits within 1 s (the store-driven change feed: PRAGMA data_version polling), and
 * under load through both, with subscribers on both and one process SIGKILLed mid-load, every
 * acknowledged event is stored exactly once and every subscriber's rebuilt surface equals
 * GetSurface (or, for the killed process's subscribers, the surface of the log prefix they saw).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials } from '@grpc/grpc-js';
import {
  SessionServiceClient, SubscribeEventsRequest, SubscribeSurfaceRequest, type SubscribeEventsResponse, type SubscribeSurfaceResponse,
} from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import { input, replaceOp, userMessage } from '../support/events.js';
import { allEvents, api, replay, type Api } from '../support/e2e.js';
import { ClientSurface, Tail } from '../support/subscribe.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';

let dir: string;
const running: ServerProcess[] = [];
beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'palimpsest-two-'));
}, 120_000);
afterAll(() => {
  for (const p of running) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function connect(address: string): Api {
  return api(new SessionServiceClient(address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
}

async function serve(db: string): Promise<{ proc: ServerProcess; c: Api }> {
  const proc = await spawnServer(['--db', db]);
  running.push(proc);
  return { proc, c: connect(proc.address) };
}

function surfaceTail(c: Api, sessionId: string): { tail: Tail<SubscribeSurfaceResponse>; surface: ClientSurface; failure: () => string | undefined } {
  const tail = new Tail<SubscribeSurfaceResponse>(c.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial({ sessionId, snapshot: true })));
  const surface = new ClientSurface();
  let failure: string | undefined;
  tail.stream.on('data', (m: SubscribeSurfaceResponse) => {
    try {
      surface.apply(m);
    } catch (e) {
      failure ??= (e as Error).message;
    }
  });
  return { tail, surface, failure: () => failure };
}

describe('two server processes on one SQLite file', () => {
  it("a subscriber on one process sees the other's commits within 1 s", async () => {
    const db = join(dir, 'notify.db');
    const one = await serve(db);
    const two = await serve(db);
    await one.c.createSession({ sessionId: 'n' });
    const tail = new Tail<SubscribeEventsResponse>(two.c.client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: 'n' })));
    await tail.until((t) => t.msgs.some((m) => m.kind?.$case === 'caughtUp'), 10_000, 'caught up');
    const seen = (seq: number) => (t: Tail<SubscribeEventsResponse>) => t.msgs.some((m) => m.kind?.$case === 'event' && m.kind.value.seq === seq);
    for (let i = 0; i < 5; i++) {
      const started = Date.now();
      const res = await one.c.appendEvents({ sessionId: 'n', events: [userMessage(`m${i}`, `hello ${i}`)] });
      expect(res.seqs).toEqual([i]);
      await tail.until(seen(i), 10_000, `seq ${i} on the other process`);
      // Generous for a loaded machine: the poll runs every 150 ms.
      expect(Date.now() - started).toBeLessThan(1_000);
    }
    const events = tail.msgs.flatMap((m) => (m.kind?.$case === 'event' ? [m.kind.value.seq] : []));
    expect(events).toEqual([0, 1, 2, 3, 4]);
    tail.cancel();
    one.proc.proc.kill('SIGTERM');
    two.proc.proc.kill('SIGTERM');
    await Promise.all([one.proc.exited, two.proc.exited]);
  });

  it('appends through both, subscribers on both, SIGKILL one mid-load: acknowledged events once, surfaces equal', async () => {
    const db = join(dir, 'load.db');
    const one = await serve(db);
    const two = await serve(db);
    const SESSIONS = ['la', 'lb'];
    for (const id of SESSIONS) await one.c.createSession({ sessionId: id });
    const subs = SESSIONS.flatMap((id) => [one, two].flatMap((p) => [0, 1].map(() => ({ id, on: p, ...surfaceTail(p.c, id) }))));
    for (const s of subs) await s.tail.until((t) => t.msgs.some((m) => m.kind?.$case === 'caughtUp'), 10_000, 'caught up');

    const acks: { id: string; marker: string; seqs: readonly number[] }[] = [];
    let killed = false;
    const writer = async (c: Api, w: number, until: () => boolean): Promise<void> => {
      const lastUser = new Map<string, number>();
      for (let n = 0; !until(); n++) {
        const id = SESSIONS[(w + n) % SESSIONS.length] as string;
        const marker = `w${w}n${n}`;
        const mine = lastUser.get(id);
        const events: EventInput[] = [];
        const size = 1 + ((n + w) % 3);
        for (let i = 0; i < size; i++) {
          const data = { id: `${marker}-${i}`, role: 'user', content: [{ type: 'text', text: marker }], source: { kind: 'user' } };
          if (i === 0 && mine !== undefined && n % 5 === 4) events.push(input('user/message', data, { surfaceOp: replaceOp(mine, mine), sourceEventSeqs: { seqs: [mine] } }));
          else if (i % 2 === 0) events.push(input('user/message', data, { surfaceOp: { $case: 'append', value: {} } }));
          else events.push(input('x/marker', { marker, i }));
        }
        let seqs: number[];
        try {
          seqs = (await c.appendEvents({ sessionId: id, events })).seqs;
        } catch (e) {
          // Through the killed process: outcome unknown. A replace whose target another writer
          // replaced meanwhile is refused: fine. ABORTED (CONFLICT_RETRIES_EXHAUSTED: the other
          // process kept moving the head through all of the server's attempts) appended nothing
          // and says to retry, as a client does: the next request goes on. Anything else
          // through the live process is a bug.
          const code = (e as { code?: number }).code;
          if (c === one.c && killed) return;
          if (code === 9 /* FAILED_PRECONDITION */ || code === 3 /* INVALID_ARGUMENT */) {
            lastUser.delete(id);
            continue;
          }
          if (code === 10 /* ABORTED */ && /kept moving under concurrent writers/.test((e as Error).message)) continue;
          throw e;
        }
        acks.push({ id, marker, seqs });
        events.forEach((e, i) => { if (e.type === 'user/message') lastUser.set(id, seqs[i] as number); });
      }
    };
    let stopTwo = false;
    const w1 = [0, 1, 2].map((w) => writer(one.c, w, () => false));
    const w2 = [3, 4, 5].map((w) => writer(two.c, w, () => stopTwo));
    // Mid-load: wait for some acknowledged traffic through both, then kill the first process.
    const deadline = Date.now() + 20_000;
    while (acks.length < 150 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(acks.length).toBeGreaterThanOrEqual(150);
    killed = true;
    one.proc.proc.kill('SIGKILL');
    await one.proc.exited;
    await Promise.all(w1);
    const afterKill = acks.length;
    while (acks.length < afterKill + 60) await new Promise((r) => setTimeout(r, 20));
    stopTwo = true;
    await Promise.all(w2);

    for (const id of SESSIONS) {
      const events = await allEvents(two.c, id);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
      // Every acknowledged event present once, at its acknowledged seq.
      const markers = events.map((e) => {
        const k = e.data?.kind;
        const d = k?.$case === 'json' ? JSON.parse(k.value) : undefined;
        return e.type === 'x/marker' ? d.marker : d.content[0].text;
      });
      for (const a of acks.filter((x) => x.id === id)) for (const s of a.seqs) expect(markers[s]).toBe(a.marker);
      // ... and exactly once (no batch stored twice, e.g. by a retry through the other process).
      const stored = new Map<string, number>();
      for (const m of markers) stored.set(m, (stored.get(m) ?? 0) + 1);
      for (const a of acks.filter((x) => x.id === id)) expect(stored.get(a.marker), a.marker).toBe(a.seqs.length);
      const surface = (await two.c.getSurface({ sessionId: id })).seqs;
      expect(surface).toEqual(replay(events, id).surface);
      const head = events.length - 1;
      for (const s of subs.filter((x) => x.id === id)) {
        expect(s.failure()).toBeUndefined();
        if (s.on === two) {
          await s.tail.until(() => s.surface.cursor >= head, 15_000, `subscriber on the live process reaches ${head}`);
          expect(s.surface.seqs).toEqual(surface);
        } else {
          // The killed process's subscribers end; what they rebuilt is the surface of the prefix they saw.
          await s.tail.until((t) => t.ended, 15_000, 'stream of the killed process ends');
          expect(s.surface.seqs).toEqual(replay(events.slice(0, s.surface.cursor + 1), id).surface);
        }
      }
    }
    for (const s of subs) s.tail.cancel();
    two.proc.proc.kill('SIGTERM');
    await two.proc.exited;
  }, 90_000);
});
