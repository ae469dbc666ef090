/**
 * A failed import cleans up only its own pending session. When its lease passed and another
 * process swept it, the id may since belong to someone else's live session: that one is kept.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, SessionService } from '../../src/app/session-service.js';
import { MemoryDatabase, MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
const services: SessionService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) await s.close();
});

const HEADER = JSON.stringify({ type: 'session', version: 0, id: 'x', createdAt: 1, delegationDepth: 0 });
const EVENT = JSON.stringify({ type: 'user/message', seq: 0, time: 1, surfaceOp: 'append', data: { id: 'u', role: 'user', content: [{ type: 'text', text: 'imported' }], source: { kind: 'user' } } });

describe('a failed import', () => {
  it('does not delete a live session that took its id after its lease was swept', async () => {
    const database = new MemoryDatabase();
    const a = new SessionService(new MemorySessionStore({ database }));
    services.push(a);
    let b: SessionService | undefined;
    async function* chunks(): AsyncGenerator<Uint8Array> {
      yield Buffer.from(`${HEADER}\n${EVENT}\n`);
      // The import stalls past its lease: a store opened later sweeps the pending session, and
      // another client creates "x" and appends (acknowledged) before this stream fails.
      b = new SessionService(new MemorySessionStore({ database, now: () => Date.now() + 60 * 60_000 }));
      services.push(b);
      await b.createSession(ctx, { id: 'x' });
      expect((await b.append(ctx, 'x', [user('live')])).seqs).toEqual([0]);
      throw new Error('client cancelled');
    }
    await expect(a.importJsonl(ctx, chunks(), {})).rejects.toThrow('client cancelled');
    const key = b!.storageKey(ctx, 'x');
    expect(await b!.store.getSession(key)).toMatchObject({ nextSeq: 1, eventCount: 1 });
    expect((await b!.store.readEvents(key, { fromSeq: 0, direction: 'forward', limit: 10 })).map((e) => e.seq)).toEqual([0]);
  });

  it('still deletes its own pending session (the success case next to it)', async () => {
    const database = new MemoryDatabase();
    const store = new MemorySessionStore({ database });
    const a = new SessionService(store);
    services.push(a);
    async function* chunks(): AsyncGenerator<Uint8Array> {
      yield Buffer.from(`${HEADER}\n${EVENT}\n`);
      throw new Error('client cancelled');
    }
    await expect(a.importJsonl(ctx, chunks(), {})).rejects.toThrow('client cancelled');
    expect(database.sessions.size).toBe(0);
    expect(await store.getTenantUsage(ctx.tenant)).toEqual({ sessions: 0, dataBytes: 0 });
  });
});
