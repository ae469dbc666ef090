/**
 * Three `palimpsest serve` replicas on one PostgreSQL database (issue #13), against the run's
 * real throwaway cluster:
 *  - a subscriber on one replica hears another replica's commits at once (LISTEN/NOTIFY hint, then
 *    a read by seq);
 *  - under load: concurrent appenders on one session spread over the replicas (with and without
 *    expected_last_seq, idempotency keys retried on another replica), subscribers on every
 *    replica, one replica SIGKILLed mid-load and restarted on the same database: every
 *    acknowledged event is stored exactly once at its acknowledged seq, seqs are contiguous, every
 *    live subscriber's rebuilt surface equals GetSurface (ClientSurface throws on any gap,
 *    duplicate or reorder), and the killed replica's subscribers resume from their cursor on
 *    another replica and end equal too;
 *  - a session deleted through one replica leaves the other's hot-session cache at once (issue #33:
 *    its handle stayed until LRU eviction at 10,000 sessions, the soak's steady memory growth).
 */
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
import { waitFor } from '../support/poll.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';

const running: ServerProcess[] = [];
let db: TestDatabase | undefined;

function connect(address: string): Api {
  return api(new SessionServiceClient(address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
}

interface Replica {
  readonly proc: ServerProcess;
  readonly c: Api;
  readonly name: string;
}

async function serve(name: string): Promise<Replica> {
  const proc = await spawnServer(['--db', db!.url]);
  running.push(proc);
  return { proc, c: connect(proc.address), name };
}

interface SurfaceSub {
  readonly tail: Tail<SubscribeSurfaceResponse>;
  readonly surface: ClientSurface;
  failure(): string | undefined;
}

function surfaceTail(c: Api, sessionId: string, surface = new ClientSurface(), afterSeq?: number): SurfaceSub {
  const request = afterSeq === undefined ? { sessionId, snapshot: true } : { sessionId, afterSeq };
  const tail = new Tail<SubscribeSurfaceResponse>(c.client.subscribeSurface(SubscribeSurfaceRequest.fromPartial(request)));
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

const cachedSessions = async (metricsPort: number): Promise<number> =>
  Number(/^palimpsest_cached_sessions (\d+)$/m.exec(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text())?.[1] ?? NaN);

const caughtUp = (t: Tail<SubscribeSurfaceResponse>): boolean => t.msgs.some((m) => m.kind?.$case === 'caughtUp');

describe.skipIf(!hasPostgres())('three server replicas on one PostgreSQL database', () => {
  beforeAll(async () => {
    ensureBuilt();
    db = await createTestDatabase();
  }, 120_000);
  afterAll(async () => {
    for (const p of running) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
    await Promise.all(running.map((p) => p.exited));
    await db?.drop();
  });

  it("a subscriber on one replica sees another replica's commits within 1 s", async () => {
    const a = await serve('a');
    const b = await serve('b');
    await a.c.createSession({ sessionId: 'n' });
    const tail = new Tail<SubscribeEventsResponse>(b.c.client.subscribeEvents(SubscribeEventsRequest.fromPartial({ sessionId: 'n' })));
    await tail.until((t) => t.msgs.some((m) => m.kind?.$case === 'caughtUp'), 10_000, 'caught up');
    const seen = (seq: number) => (t: Tail<SubscribeEventsResponse>) => t.msgs.some((m) => m.kind?.$case === 'event' && m.kind.value.seq === seq);
    for (let i = 0; i < 5; i++) {
      const started = Date.now();
      const res = await a.c.appendEvents({ sessionId: 'n', events: [userMessage(`m${i}`, `hello ${i}`)] });
      expect(res.seqs).toEqual([i]);
      await tail.until(seen(i), 10_000, `seq ${i} on the other replica`);
      // NOTIFY, not the 2 s slow poll, delivers it; generous for a loaded machine.
      expect(Date.now() - started).toBeLessThan(1_000);
    }
    expect(tail.msgs.flatMap((m) => (m.kind?.$case === 'event' ? [m.kind.value.seq] : []))).toEqual([0, 1, 2, 3, 4]);
    tail.cancel();
    a.proc.proc.kill('SIGTERM');
    b.proc.proc.kill('SIGTERM');
    await Promise.all([a.proc.exited, b.proc.exited]);
  });

  it("a session deleted through one replica leaves the other replica's hot-session cache", async () => {
    const a = await serve('a');
    // Port 0: the server prints the port it bound before its listening line (no free-port race).
    const bProc = await spawnServer(['--db', db!.url, '--metrics-listen', '127.0.0.1:0']);
    running.push(bProc);
    const metricsPort = Number(/metrics \(Prometheus \/metrics\) on 127\.0\.0\.1:(\d+)/.exec(bProc.stdout())?.[1]);
    expect(metricsPort).toBeGreaterThan(0);
    const b = connect(bProc.address);
    const ids = ['gone-0', 'gone-1', 'gone-2', 'kept'];
    for (const id of ids) {
      await a.c.createSession({ sessionId: id });
      // Written through b: b holds the session's handle (engine and all) in its cache.
      await b.appendEvents({ sessionId: id, events: [userMessage(`m-${id}`, 'hello')] });
    }
    expect(await cachedSessions(metricsPort)).toBe(ids.length);
    for (const id of ids.slice(0, 3)) await a.c.deleteSession({ sessionId: id });
    // The deletion hints (NOTIFY) reach b: only the session still stored stays cached.
    await waitFor(async () => (await cachedSessions(metricsPort)) === 1, 10_000, "b's cache to drop the sessions a deleted");
    expect((await b.appendEvents({ sessionId: 'kept', events: [userMessage('m2', 'again')] })).seqs).toEqual([1]);
    a.proc.proc.kill('SIGTERM');
    bProc.proc.kill('SIGTERM');
    await Promise.all([a.proc.exited, bProc.exited]);
  });

  it('appenders on one session over three replicas, subscribers on each, one SIGKILLed and restarted: acknowledged events once, surfaces equal', async () => {
    const replicas = [await serve('r0'), await serve('r1'), await serve('r2')];
    const ID = 'hot';
    await replicas[0]!.c.createSession({ sessionId: ID });
    const subs = replicas.flatMap((r) => [0, 1].map(() => ({ on: r, ...surfaceTail(r.c, ID) })));
    for (const s of subs) await s.tail.until(caughtUp, 10_000, 'caught up');

    const acks: { marker: string; seqs: readonly number[] }[] = [];
    let victimDown = false;
    let stop = false;
    const victim = replicas[2]!;
    let retriedKeys = 0;
    const live = (r: Replica): Replica => (victimDown && r === victim ? replicas[0]! : r);

    /**
     * One writer. Odd writers use expected_last_seq (retrying HEAD_MISMATCH on a fresh head);
     * every third batch carries an idempotency key and is sent again through another replica,
     * which must answer with the same seqs.
     */
    const writer = async (w: number): Promise<void> => {
      let lastUser: number | undefined;
      for (let n = 0; !stop; n++) {
        const home = live(replicas[(w + n) % 3]!);
        const marker = `w${w}n${n}`;
        const events: EventInput[] = [];
        for (let i = 0; i < 1 + ((n + w) % 3); i++) {
          const data = { id: `${marker}-${i}`, role: 'user', content: [{ type: 'text', text: marker }], source: { kind: 'user' } };
          if (i === 0 && lastUser !== undefined && n % 5 === 4) events.push(input('user/message', data, { surfaceOp: replaceOp(lastUser, lastUser), sourceEventSeqs: { seqs: [lastUser] } }));
          else if (i % 2 === 0) events.push(input('user/message', data, { surfaceOp: { $case: 'append', value: {} } }));
          else events.push(input('x/marker', { marker, i }));
        }
        const key = n % 3 === 0 ? `k-${marker}` : '';
        let seqs: number[] | undefined;
        for (let attempt = 0; seqs === undefined && attempt < 50 && !stop; attempt++) {
          const via = attempt === 0 ? home : live(replicas[(w + n + attempt) % 3]!);
          let expected: number | undefined;
          try {
            if (w % 2 === 1) expected = (await via.c.getSession({ sessionId: ID })).session?.headSeq ?? -1;
            const req = { sessionId: ID, events, idempotencyKey: key, ...(expected === undefined ? {} : { expectedLastSeq: expected }) };
            seqs = (await via.c.appendEvents(req)).seqs;
          } catch (e) {
            const code = (e as { code?: number }).code;
            // Through the killed replica: outcome unknown; retry elsewhere only with a key.
            if (via === victim && victimDown) {
              if (key === '') break;
              continue;
            }
            // ABORTED (CONFLICT_RETRIES_EXHAUSTED): the replica lost every re-plan to the other
            // writers, nothing was appended; the client retries, as the error says.
            if (code === 10) continue;
            if (code === 9 /* FAILED_PRECONDITION: HEAD_MISMATCH, or a replace target replaced meanwhile */) {
              if (expected !== undefined) continue;
              lastUser = undefined;
              break;
            }
            if (code === 3 /* INVALID_ARGUMENT: stale replace target */) {
              lastUser = undefined;
              break;
            }
            throw e;
          }
        }
        if (seqs === undefined) continue;
        if (key !== '') {
          // The same key through another replica: the original result, nothing appended.
          const other = live(replicas[(w + n + 1) % 3]!);
          try {
            const again = await other.c.appendEvents({ sessionId: ID, events, idempotencyKey: key });
            expect(again.seqs).toEqual(seqs);
            retriedKeys++;
          } catch (e) {
            // Only a retry that went to the replica being killed may fail.
            if (!(other === victim && victimDown)) throw e;
          }
        }
        acks.push({ marker, seqs });
        events.forEach((e, i) => { if (e.type === 'user/message') lastUser = seqs![i]; });
      }
    };
    const writers = Array.from({ length: 6 }, (_, w) => writer(w));

    await waitFor(() => acks.length >= 120, 30_000, '120 acknowledged batches');
    // Mid-load: SIGKILL one replica, keep loading through the others, then restart it.
    victimDown = true;
    victim.proc.proc.kill('SIGKILL');
    await victim.proc.exited;
    const afterKill = acks.length;
    await waitFor(() => acks.length >= afterKill + 60, 30_000, '60 more batches after the kill');
    const restarted = await serve('r2-restarted');
    replicas[2] = restarted;
    victimDown = false;
    const afterRestart = acks.length;
    await waitFor(() => acks.length >= afterRestart + 60, 30_000, '60 more batches after the restart');
    stop = true;
    await Promise.all(writers);
    expect(retriedKeys).toBeGreaterThan(0);

    const events = await allEvents(replicas[0]!.c, ID);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    const markers = events.map((e) => {
      const k = e.data?.kind;
      const d = k?.$case === 'json' ? JSON.parse(k.value) : undefined;
      return e.type === 'x/marker' ? d.marker : d.content[0].text;
    });
    for (const a of acks) for (const s of a.seqs) expect(markers[s]).toBe(a.marker);
    const stored = new Map<string, number>();
    for (const m of markers) stored.set(m, (stored.get(m) ?? 0) + 1);
    for (const a of acks) expect(stored.get(a.marker), a.marker).toBe(a.seqs.length);

    const head = events.length - 1;
    for (const r of [replicas[0]!, replicas[1]!, restarted]) {
      expect((await r.c.getSurface({ sessionId: ID })).seqs).toEqual(replay(events, ID).surface);
    }
    const surface = (await replicas[1]!.c.getSurface({ sessionId: ID })).seqs;
    for (const s of subs) {
      expect(s.failure()).toBeUndefined();
      if (s.on !== victim) {
        await s.tail.until(() => s.surface.cursor >= head, 15_000, `subscriber on ${s.on.name} reaches ${head}`);
        expect(s.surface.seqs).toEqual(surface);
        continue;
      }
      // The killed replica's streams ended; what they rebuilt is the surface of the prefix they saw...
      await s.tail.until((t) => t.ended, 15_000, 'stream of the killed replica ends');
      expect(s.surface.seqs).toEqual(replay(events.slice(0, s.surface.cursor + 1), ID).surface);
      // ... and they resume from their cursor on another replica (the restarted one and r1).
      const resumed = surfaceTail(s === subs[4] ? restarted.c : replicas[1]!.c, ID, s.surface, s.surface.cursor);
      await resumed.tail.until(() => s.surface.cursor >= head, 15_000, `resumed subscriber reaches ${head}`);
      expect(resumed.failure()).toBeUndefined();
      expect(s.surface.seqs).toEqual(surface);
      resumed.tail.cancel();
    }
    for (const s of subs) s.tail.cancel();
    for (const r of [replicas[0]!, replicas[1]!, restarted]) r.proc.proc.kill('SIGTERM');
    await Promise.all([replicas[0]!, replicas[1]!, restarted].map((r) => r.proc.exited));
  }, 150_000);
});
