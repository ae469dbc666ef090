/**
 * The session feed across three `palimpsest serve` replicas on one PostgreSQL database (issue
 * #35): a `palimpsest sessions --watch` subscriber on replica C sees created, appended (with the
 * right head) and deleted for sessions written through A and B; after being SIGKILLed and started
 * again with `--after` its last printed position, it has seen every change exactly once, in the
 * feed's order (compared with a full read of the feed from the beginning on another replica).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials } from '@grpc/grpc-js';
import { SessionServiceClient, SubscribeSessionsRequest, type SubscribeSessionsResponse } from '../../gen/palimpsest/v1/service.js';
import { RunningCli, spawnCli } from '../support/cli.js';
import { api, type Api } from '../support/e2e.js';
import { userMessage } from '../support/events.js';
import { ensureBuilt, spawnServer, type ServerProcess } from '../support/server-process.js';
import { Tail } from '../support/subscribe.js';
import { createTestDatabase, hasPostgres, type TestDatabase } from '../support/postgres.js';

const running: ServerProcess[] = [];
let db: TestDatabase | undefined;

async function serve(): Promise<{ proc: ServerProcess; c: Api }> {
  const proc = await spawnServer(['--db', db!.url]);
  running.push(proc);
  return { proc, c: api(new SessionServiceClient(proc.address, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 })) };
}

const changes = (w: RunningCli): Record<string, unknown>[] =>
  w.lines.filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>).filter((o) => o.kind !== undefined);
const key = (o: Record<string, unknown>): string => `${o.position} ${o.kind} ${o.session} ${o.headSeq}`;

describe.skipIf(!hasPostgres())('the session feed across three replicas on one PostgreSQL database', () => {
  beforeAll(async () => {
    ensureBuilt();
    db = await createTestDatabase();
  }, 120_000);
  afterAll(async () => {
    for (const p of running) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
    await Promise.all(running.map((p) => p.exited));
    await db?.drop();
  });

  it('a subscriber on C sees the changes made through A and B, and after a kill and resume every change exactly once', async () => {
    const [a, b, c] = [await serve(), await serve(), await serve()];
    const watch = (after?: number): RunningCli =>
      new RunningCli(spawnCli(['sessions', '--watch', '--json', ...(after === undefined ? [] : ['--after', String(after)]), '--addr', c.proc.address]));
    let w = watch();
    const seen: Record<string, unknown>[] = [];
    try {
      await a.c.createSession({ sessionId: 'p1' });
      await b.c.appendEvents({ sessionId: 'p1', events: [userMessage('u0', 'zero')] });
      await a.c.appendEvents({ sessionId: 'p1', events: [userMessage('u1', 'one'), userMessage('u2', 'two')] });
      await b.c.createSession({ sessionId: 'p2' });
      await w.until(() => changes(w).length === 4, 15_000);
      expect(changes(w).map((o) => [o.kind, o.session, o.headSeq])).toEqual([
        ['created', 'p1', null], ['appended', 'p1', 0], ['appended', 'p1', 2], ['created', 'p2', null],
      ]);
      seen.push(...changes(w));
    } finally {
      w.proc.kill('SIGKILL');
      await w.exited;
    }
    // While the subscriber is down: more changes through A and B, concurrently.
    await Promise.all([
      (async () => {
        for (let i = 3; i < 8; i++) await a.c.appendEvents({ sessionId: 'p1', events: [userMessage(`u${i}`, `m${i}`)] });
      })(),
      (async () => {
        for (let i = 0; i < 5; i++) await b.c.appendEvents({ sessionId: 'p2', events: [userMessage(`v${i}`, `n${i}`)] });
      })(),
    ]);
    w = watch(seen[seen.length - 1]!.position as number);
    try {
      await b.c.deleteSession({ sessionId: 'p1' });
      await w.until(() => changes(w).length === 11, 15_000);
      seen.push(...changes(w));
    } finally {
      w.proc.kill('SIGINT');
      expect(await w.exited).toBe(0);
    }
    // The whole feed, read from the beginning on A: what C's subscriber printed, exactly once each.
    const tail = new Tail<SubscribeSessionsResponse>(a.c.client.subscribeSessions(SubscribeSessionsRequest.fromPartial({})));
    await tail.until((t) => t.msgs.some((m) => m.kind?.$case === 'caughtUp'), 15_000, 'caught up on A');
    tail.stream.cancel();
    const full = tail.msgs.filter((m) => m.kind?.$case === 'change').map((m) => {
      const ch = (m.kind as { value: { kind: number; sessionId: string; headSeq?: number } }).value;
      return `${m.position} ${['', 'created', 'deleted', 'labels_changed', 'appended'][ch.kind]} ${ch.sessionId} ${ch.headSeq ?? null}`;
    });
    expect(seen.map(key)).toEqual(full);
    expect(full).toHaveLength(15);
    // Heads of each session ascend in the feed (commit order per session).
    for (const id of ['p1', 'p2']) {
      const heads = seen.filter((o) => o.session === id && o.kind === 'appended').map((o) => o.headSeq as number);
      expect([...heads].sort((x, y) => x - y)).toEqual(heads);
    }
    expect(seen[seen.length - 1]).toMatchObject({ kind: 'deleted', session: 'p1', headSeq: 7 });
  }, 90_000);
});
