/**
 * A PostgreSQL statement that fails with deadlock_detected (40P01) or serialization_failure
 * (40001) was rolled back whole by the server: the store runs it again (STATEMENT_ATTEMPTS in
 * all) instead of answering INTERNAL. The soak (bench/soak.md) met 40P01 between two replicas'
 * writes of one tenant. Other errors are not retried.
 */
import type pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { Statements, STATEMENT_ATTEMPTS } from '../../src/store/postgres/statements.js';

/** A pool whose query fails with the given SQLSTATEs in turn, then answers one row. */
function failingPool(codes: string[]): { pool: pg.Pool; calls: () => number } {
  let calls = 0;
  const pool = {
    query: async () => {
      const code = codes[calls++];
      if (code !== undefined) throw Object.assign(new Error(`failed with ${code}`), { code });
      return { rows: [{ ok: 1 }] };
    },
  } as unknown as pg.Pool;
  return { pool, calls: () => calls };
}

describe('Statements.query', () => {
  it.each(['40P01', '40001'])('runs a statement rolled back by %s again, and answers its rows', async (code) => {
    const { pool, calls } = failingPool([code, code]);
    const st = new Statements(pool, 'palimpsest');
    await expect(st.query('SELECT 1')).resolves.toEqual([{ ok: 1 }]);
    expect(calls()).toBe(3);
    expect(st.inFlight.size).toBe(0);
  });

  it(`gives up after ${STATEMENT_ATTEMPTS} attempts with the error as it is`, async () => {
    const { pool, calls } = failingPool(Array.from({ length: 10 }, () => '40P01'));
    await expect(new Statements(pool, 'palimpsest').query('SELECT 1')).rejects.toMatchObject({ code: '40P01' });
    expect(calls()).toBe(STATEMENT_ATTEMPTS);
  });

  it('does not retry other errors (a unique violation, a RAISE)', async () => {
    const unique = failingPool(['23505']);
    await expect(new Statements(unique.pool, 'palimpsest').query('SELECT 1')).rejects.toMatchObject({ code: '23505' });
    expect(unique.calls()).toBe(1);
    const raised = failingPool(['P0001']);
    await expect(new Statements(raised.pool, 'palimpsest').query('SELECT 1')).rejects.toThrow(/failed with P0001/);
    expect(raised.calls()).toBe(1);
  });

  it('a call being retried is one call in flight through its pauses: a close() issued meanwhile waits for it once, then it has finished', async () => {
    const random = vi.spyOn(Math, 'random').mockReturnValue(1); // pauses of 5 and 10 ms
    try {
      const { pool, calls } = failingPool(['40P01', '40P01']);
      const st = new Statements(pool, 'palimpsest');
      let answered = false;
      const call = st.query('SELECT 1').then((rows) => {
        answered = true;
        return rows;
      });
      // What PostgresSessionStore.close() does: wait for the calls in flight, then end the pool.
      let waits = 0;
      while (st.inFlight.size > 0) {
        waits++;
        await Promise.allSettled([...st.inFlight]);
        await new Promise((r) => setImmediate(r));
      }
      st.ended = true;
      expect(answered).toBe(true);
      expect(waits).toBe(1);
      await expect(call).resolves.toEqual([{ ok: 1 }]);
      expect(calls()).toBe(3);
      // A call issued after close() is refused.
      await expect(st.query('SELECT 1')).rejects.toThrow(/closed/);
    } finally {
      random.mockRestore();
    }
  });
});
