/**
 * A PostgreSQL statement that fails with deadlock_detected (40P01) or serialization_failure
 * (40001) was rolled back whole by the server: the store runs it again (STATEMENT_ATTEMPTS in
 * all) instead of answering INTERNAL. The soak (bench/soak.md) met 40P01 between two replicas'
 * writes of one tenant. Other errors are not retried.
 */
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
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
});
