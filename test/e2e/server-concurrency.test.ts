/**
 * Many clients appending at once, to one session and to many: no acknowledged event is lost or
 * duplicated, seqs are contiguous, every acked batch sits at its acked seqs in order, and the
 * served surface equals a fresh import-mode replay of the served log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, type ServiceError } from '@grpc/grpc-js';
import { decodeError } from '../../src/client/error-details.js';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import type { EventInput } from '../../gen/palimpsest/v1/event.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { input, replaceOp } from '../support/events.js';
import { allEvents, api, replay, until, type Api } from '../support/e2e.js';
import { rng } from '../support/rng.js';

let t: TestServer;
let clients: Api[];
const CLIENTS = 8;

beforeAll(async () => {
  t = await startTestServer();
  // Separate channels (not one shared connection), as independent processes would have.
  clients = Array.from({ length: CLIENTS }, () => api(new SessionServiceClient(t.server.address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 })));
});
afterAll(async () => {
  for (const c of clients ?? []) c.client.close();
  await t?.stop();
});


const user = (tag: string, surfaceOp: EventInput['surfaceOp'] = { $case: 'append', value: {} }, sources?: number[]): EventInput =>
  input('user/message', { id: tag, role: 'user', content: [{ type: 'text', text: tag }], source: { kind: 'user' } }, { surfaceOp, sourceEventSeqs: sources ? { seqs: sources } : undefined });

interface Acked {
  readonly sessionId: string;
  readonly seqs: readonly number[];
  readonly tags: readonly string[];
}

/** One client's workload: batches of 1-5 events, some of them replacing the client's own last message. */
async function worker(c: Api, client: number, ops: number, pick: () => string, rand: () => number, acked: Acked[]): Promise<void> {
  const lastUser = new Map<string, number>();
  for (let n = 0; n < ops; n++) {
    const sessionId = pick();
    const size = 1 + Math.floor(rand() * 5);
    const events: EventInput[] = [];
    const tags: string[] = [];
    const mine = lastUser.get(sessionId);
    for (let i = 0; i < size; i++) {
      const tag = `c${client}-n${n}-i${i}`;
      tags.push(tag);
      if (i === 0 && mine !== undefined && rand() < 0.3) {
        // Replace the client's own last message (nobody else touches it, so it is still on the surface).
        events.push(user(tag, replaceOp(mine, mine), [mine]));
      } else if (rand() < 0.5) {
        events.push(user(tag));
      } else {
        events.push(input('x/note', { tag }));
      }
    }
    const res = await c.appendEvents({ sessionId, events });
    expect(res.replayed).toBe(false);
    expect(res.seqs).toHaveLength(size);
    acked.push({ sessionId, seqs: res.seqs, tags });
    let lastU: number | undefined;
    events.forEach((e, i) => { if (e.type === 'user/message') lastU = res.seqs[i]; });
    if (lastU !== undefined) lastUser.set(sessionId, lastU);
  }
}

function tagOf(e: { data?: { kind?: { $case: string; value: unknown } } }): string {
  const k = e.data?.kind;
  if (k?.$case !== 'json') throw new Error('json data expected');
  const d = JSON.parse(k.value as string) as { id?: string; tag?: string };
  return (d.tag ?? d.id) as string;
}

async function verify(c: Api, sessionIds: readonly string[], acked: readonly Acked[]): Promise<void> {
  for (const sessionId of sessionIds) {
    const mine = acked.filter((x) => x.sessionId === sessionId);
    const expected = mine.reduce((n, x) => n + x.seqs.length, 0);
    const events = await allEvents(c, sessionId, 97);
    // Contiguous, no loss, no duplicates.
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: expected }, (_, i) => i));
    const tags = events.map(tagOf);
    expect(new Set(tags).size).toBe(tags.length);
    // Every acked batch is at its acked seqs, in order, contiguous.
    for (const a of mine) {
      for (let i = 0; i < a.seqs.length; i++) {
        expect(a.seqs[i]).toBe((a.seqs[0] as number) + i);
        expect(tags[a.seqs[i] as number]).toBe(a.tags[i]);
      }
    }
    const surface = await c.getSurface({ sessionId });
    const r = replay(events, sessionId);
    expect(surface.seqs).toEqual(r.surface);
    expect(surface.replaceGeneration).toBe(r.replaceGeneration);
    const { session } = await c.getSession({ sessionId });
    expect(session).toMatchObject({ eventCount: expected, headSeq: expected - 1, surfaceLength: r.surface.length });
  }
}

describe('concurrent appends', () => {
  it('many clients on one session: contiguous seqs, nothing lost or duplicated, surface == replay', async () => {
    await clients[0]!.createSession({ sessionId: 'hot' });
    const acked: Acked[] = [];
    await Promise.all(clients.map((c, i) => worker(c, i, 30, () => 'hot', rng(1000 + i), acked)));
    expect(acked).toHaveLength(CLIENTS * 30);
    await verify(clients[3]!, ['hot'], acked);
    // Replaces did happen (otherwise the test proves less than it claims).
    expect((await clients[0]!.getSurface({ sessionId: 'hot' })).replaceGeneration).toBeGreaterThan(5);
  });

  it('many clients on many sessions at once', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `many-${i}`);
    for (const id of ids) await clients[0]!.createSession({ sessionId: id });
    const acked: Acked[] = [];
    await Promise.all(clients.map((c, i) => {
      const rand = rng(2000 + i);
      return worker(c, i, 40, () => ids[Math.floor(rand() * ids.length)] as string, rand, acked);
    }));
    await verify(clients[5]!, ids, acked);
  });

  it('deleting and re-creating a session under concurrent appends: only SESSION_NOT_FOUND, and the new session starts clean', async () => {
    const c0 = clients[0]!;
    for (let round = 0; round < 5; round++) {
      await c0.createSession({ sessionId: 'churn' });
      const writes = clients.map(async (c, i) => {
        for (let n = 0; n < 10; n++) {
          try {
            await c.appendEvents({ sessionId: 'churn', events: [user(`r${round}-c${i}-n${n}`), input('x/note', { tag: `r${round}-c${i}-n${n}-b` })] });
          } catch (e) {
            expect(decodeError(e as ServiceError).reason).toBe('SESSION_NOT_FOUND');
          }
        }
      });
      await until(async () => ((await c0.getSession({ sessionId: 'churn' })).session?.eventCount ?? 0) >= 10, 'some appends');
      await c0.deleteSession({ sessionId: 'churn' });
      await Promise.all(writes);
      expect((await c0.createSession({ sessionId: 'churn' })).session).toMatchObject({ eventCount: 0, surfaceLength: 0 });
      const r = await c0.appendEvents({ sessionId: 'churn', events: [user(`fresh-${round}`)] });
      expect(r).toEqual({ seqs: [0], replayed: false, surfaceLength: 1 });
      expect((await c0.getSurface({ sessionId: 'churn' })).seqs).toEqual([0]);
      await c0.deleteSession({ sessionId: 'churn' });
    }
  });

  it('concurrent writers with expected_last_seq: exactly one wins each head', async () => {
    const c0 = clients[0]!;
    await c0.createSession({ sessionId: 'cas-race' });
    let head = -1;
    for (let round = 0; round < 10; round++) {
      const results = await Promise.allSettled(clients.map((c, i) => c.appendEvents({ sessionId: 'cas-race', expectedLastSeq: head, events: [input('x/note', { tag: `r${round}-c${i}` })] })));
      const ok = results.filter((r) => r.status === 'fulfilled');
      expect(ok).toHaveLength(1);
      head++;
    }
    expect((await c0.getSession({ sessionId: 'cas-race' })).session?.eventCount).toBe(10);
  });
});
