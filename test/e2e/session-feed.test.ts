/**
 * The session feed and session metadata through a real server (issue #35, SQLite store):
 * `palimpsest sessions --watch` prints every change and resumes after dropped connections with
 * every change exactly once; `palimpsest watch S --wait` started before `create S` prints the first
 * delta; UpdateSession with a stale expected_version is refused (ABORTED /
 * METADATA_VERSION_MISMATCH) and leaves the labels alone; the TypeScript client's
 * subscribeSessions resumes by itself; SubscribeSessions with `after` beyond the end is OUT_OF_RANGE.
 */
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SubscribeSessionsRequest, type SubscribeSessionsResponse } from '../../gen/palimpsest/v1/service.js';
import { PalimpsestClient, type SessionFeedItem } from '../../clients/typescript/src/index.js';
import { RunningCli, spawnCli } from '../support/cli.js';
import { api, failure, type Api } from '../support/e2e.js';
import { userMessage } from '../support/events.js';
import { ensureBuilt } from '../support/server-process.js';
import { Tail } from '../support/subscribe.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { startTestServer, type TestServer } from '../support/test-server.js';

let ts: TestServer;
let a: Api;
beforeAll(async () => {
  ensureBuilt();
  ts = await startTestServer();
  a = api(ts.client);
});
afterAll(async () => {
  await ts?.stop();
});

const objects = (w: RunningCli): Record<string, unknown>[] => w.lines.filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
const changes = (w: RunningCli): Record<string, unknown>[] => objects(w).filter((o) => o.kind !== undefined);

describe('sessions --watch', () => {
  it('prints created, appended (head, types), labels_changed and deleted, and resumes after dropped connections exactly once', async () => {
    const proxy = await TcpProxy.start(ts.server.address);
    const w = new RunningCli(spawnCli(['sessions', '--watch', '--from-now', '--json', '--selector', 'feed=cli', '--addr', proxy.address]));
    try {
      await w.until(() => objects(w).some((o) => o.signal === 'caught-up'));
      await a.createSession({ sessionId: 'fw1', labels: { feed: 'cli' } });
      await a.createSession({ sessionId: 'fw-other', labels: { feed: 'no' } });
      await w.until(() => changes(w).length === 1);
      expect(proxy.drop()).toBeGreaterThan(0);
      await a.appendEvents({ sessionId: 'fw1', events: [userMessage('u0', 'zero'), userMessage('u1', 'one')] });
      await w.until(() => changes(w).length === 2);
      expect(proxy.drop()).toBeGreaterThan(0);
      await a.updateSession({ sessionId: 'fw1', setLabels: { owner: 'me' } });
      await a.deleteSession({ sessionId: 'fw1' });
      await w.until(() => changes(w).length === 4);
      const got = changes(w);
      expect(got.map((o) => [o.kind, o.session, o.headSeq])).toEqual([
        ['created', 'fw1', null], ['appended', 'fw1', 1], ['labels_changed', 'fw1', 1], ['deleted', 'fw1', 1],
      ]);
      expect(got[1]).toMatchObject({ eventCount: 2, surfaceLength: 2, eventTypes: ['user/message'] });
      expect(got[2]).toMatchObject({ labels: { feed: 'cli', owner: 'me' }, previousLabels: { feed: 'cli' } });
      const positions = got.map((o) => o.position as number);
      expect([...positions].sort((x, y) => x - y)).toEqual(positions);
      expect(w.stderr).toMatch(/connection lost .*; resuming after position \d+ in \d+ ms/);
    } finally {
      w.proc.kill('SIGINT');
      expect(await w.exited).toBe(0);
      await proxy.close();
    }
  });

  it('a new run resumes after the last position printed (--after)', async () => {
    await a.createSession({ sessionId: 'fr1', labels: { feed: 'resume' } });
    const first = new RunningCli(spawnCli(['sessions', '--watch', '--json', '--selector', 'feed=resume', '--addr', ts.server.address]));
    let last: number;
    try {
      await first.until(() => changes(first).length === 1);
      last = changes(first)[0]!.position as number;
    } finally {
      first.proc.kill('SIGKILL');
      await first.exited;
    }
    await a.appendEvents({ sessionId: 'fr1', events: [userMessage('u0', 'zero')] });
    const second = new RunningCli(spawnCli(['sessions', '--watch', '--json', '--selector', 'feed=resume', '--after', String(last), '--addr', ts.server.address]));
    try {
      await second.until(() => objects(second).some((o) => o.signal === 'caught-up'));
      expect(changes(second).map((o) => [o.kind, o.session, o.headSeq])).toEqual([['appended', 'fr1', 0]]);
    } finally {
      second.proc.kill('SIGINT');
      expect(await second.exited).toBe(0);
    }
  });
});

describe('watch --wait', () => {
  it('started before create, prints the first delta; without --wait it fails with NOT_FOUND', async () => {
    const w = new RunningCli(spawnCli(['watch', 'late1', '--wait', '--json', '--addr', ts.server.address]));
    try {
      // The stream is open and waiting: the server has it registered before the session exists.
      await new Promise((r) => setTimeout(r, 300));
      expect(w.proc.exitCode).toBeNull();
      await a.createSession({ sessionId: 'late1' });
      await a.appendEvents({ sessionId: 'late1', events: [userMessage('u0', 'hello')] });
      await w.until(() => objects(w).some((o) => o.op === 'append' && o.seq === 0));
    } finally {
      w.proc.kill('SIGINT');
      expect(await w.exited).toBe(0);
    }
    const plain = new RunningCli(spawnCli(['watch', 'late2', '--json', '--no-reconnect', '--addr', ts.server.address]));
    expect(await plain.exited).not.toBe(0);
    expect(plain.stderr).toMatch(/SESSION_NOT_FOUND|does not exist/);
  });
});

describe('UpdateSession', () => {
  it('refuses a stale expected_version with ABORTED / METADATA_VERSION_MISMATCH and leaves the labels alone; the current version succeeds', async () => {
    await a.createSession({ sessionId: 'up1', labels: { a: '1' } });
    const ok = await a.updateSession({ sessionId: 'up1', setLabels: { b: '2' }, expectedVersion: 0 });
    expect(ok.session).toMatchObject({ labels: { a: '1', b: '2' }, metadataVersion: 1 });
    const err = await failure(a.updateSession({ sessionId: 'up1', setLabels: { c: '3' }, expectedVersion: 0 }));
    expect(err.code).toBe(status.ABORTED);
    expect(err.reason).toBe('METADATA_VERSION_MISMATCH');
    expect((await a.getSession({ sessionId: 'up1' })).session).toMatchObject({ labels: { a: '1', b: '2' }, metadataVersion: 1 });
  });
});

describe('SubscribeSessions', () => {
  it('after beyond the end is OUT_OF_RANGE; the TypeScript client yields changes and resumes', async () => {
    const tail = new Tail<SubscribeSessionsResponse>(ts.client.subscribeSessions(SubscribeSessionsRequest.fromPartial({ after: 1_000_000 })));
    await tail.until((t) => t.ended, 10_000, 'the refused stream to end');
    expect(tail.error?.code).toBe(status.OUT_OF_RANGE);

    const client = new PalimpsestClient(ts.server.address);
    const ac = new AbortController();
    const got: SessionFeedItem[] = [];
    const reading = (async () => {
      for await (const it of client.subscribeSessions({ fromNow: true, selector: { feed: 'ts' }, signal: ac.signal })) {
        got.push(it);
        if (got.filter((g) => g.kind === 'appended').length === 1) ac.abort();
      }
    })();
    await new Promise((r) => setTimeout(r, 200));
    await a.createSession({ sessionId: 'ts1', labels: { feed: 'ts' } });
    await a.appendEvents({ sessionId: 'ts1', events: [userMessage('u0', 'zero')] });
    await reading;
    expect(got.map((g) => g.kind)).toEqual(['caught_up', 'created', 'appended']);
    client.close();
  });
});

describe('SubscribeSessions batch', () => {
  type Msg = SubscribeSessionsResponse;
  const open = (req: Partial<SubscribeSessionsRequest>): Tail<Msg> => new Tail<Msg>(ts.client.subscribeSessions(SubscribeSessionsRequest.fromPartial(req)));
  const caughtUp = (t: Tail<Msg>): boolean => t.msgs.some((m) => m.kind?.$case === 'caughtUp');
  const changesOf = (t: Tail<Msg>) => t.msgs.flatMap((m) => (m.kind?.$case === 'change' ? [m.kind.value] : m.kind?.$case === 'changes' ? m.kind.value.changes : []));

  it('changes read together come in one message in order; an old-style subscriber gets one per message; the client resumes after any change of a batch', async () => {
    const selector = { feed: 'batch' };
    const start = open({ fromNow: true, labelSelector: selector });
    await start.until(caughtUp);
    start.stream.cancel();
    const after = start.msgs[0]!.position;
    for (let i = 0; i < 4; i++) await a.createSession({ sessionId: `fb${i}`, labels: selector });
    await a.createSession({ sessionId: 'fb-other', labels: { feed: 'no' } });

    const batched = open({ after, labelSelector: selector, batch: true });
    const plain = open({ after, labelSelector: selector });
    await batched.until(caughtUp);
    await plain.until(caughtUp);
    expect(batched.msgs.map((m) => m.kind?.$case)).toEqual(['changes', 'caughtUp']);
    expect(plain.msgs.map((m) => m.kind?.$case)).toEqual(['change', 'change', 'change', 'change', 'caughtUp']);
    const inBatch = changesOf(batched);
    expect(inBatch.map((c) => c.sessionId)).toEqual(['fb0', 'fb1', 'fb2', 'fb3']);
    expect(inBatch.map((c) => c.position)).toEqual(plain.msgs.slice(0, 4).map((m) => m.position));
    expect(batched.msgs[0]!.position).toBe(inBatch[3]!.position);

    // Live: appends made together, the same changes in the same order on both streams (the selector holds).
    await Promise.all(['fb0', 'fb1', 'fb2', 'fb3', 'fb-other'].map((id) => a.appendEvents({ sessionId: id, events: [userMessage('u0', 'zero')] })));
    await batched.until((t) => changesOf(t).length === 8);
    await plain.until((t) => changesOf(t).length === 8);
    const live = changesOf(batched).slice(4);
    expect(live.map((c) => c.sessionId).sort()).toEqual(['fb0', 'fb1', 'fb2', 'fb3']);
    expect(live.map((c) => c.position)).toEqual(changesOf(plain).slice(4).map((c) => c.position));
    expect(live.map((c) => c.position)).toEqual([...live.map((c) => c.position)].sort((x, y) => x - y));
    expect(plain.msgs.every((m) => m.kind?.$case !== 'changes')).toBe(true);
    batched.stream.cancel();
    plain.stream.cancel();

    // The TypeScript client (asks for batches) resumed after each change of the batch yields exactly the rest.
    const client = new PalimpsestClient(ts.server.address);
    try {
      const all = changesOf(batched).map((c) => c.position);
      for (const k of [0, 1, 3]) {
        const ac = new AbortController();
        const got: number[] = [];
        for await (const it of client.subscribeSessions({ after: all[k], selector, signal: ac.signal })) {
          if (it.kind === 'caught_up') break;
          got.push(it.position);
        }
        ac.abort();
        expect(got).toEqual(all.slice(k + 1));
      }
    } finally {
      client.close();
    }
  });
});
