/**
 * The PostgreSQL statement retry (issue #33) as a metric: each retry the store reports
 * (onStatementRetry) counts in palimpsest_store_statement_retries_total by SQLSTATE, and a
 * server whose store never retried shows none.
 */
import { describe, expect, it } from 'vitest';
import { loadMetrics } from '../../src/server/metrics.js';

describe('palimpsest_store_statement_retries_total', () => {
  it('counts each retry by SQLSTATE, and nothing before the first', async () => {
    const metrics = await loadMetrics(false);
    const sample = async (sqlstate: string): Promise<number | undefined> => {
      const m = new RegExp(`^palimpsest_store_statement_retries_total\\{sqlstate="${sqlstate}"\\} (\\d+)$`, 'm').exec(await metrics.registry.metrics());
      return m === null ? undefined : Number(m[1]);
    };
    expect(await sample('40P01')).toBeUndefined();
    metrics.storeStatementRetried('40P01');
    metrics.storeStatementRetried('40P01');
    metrics.storeStatementRetried('40001');
    expect(await sample('40P01')).toBe(2);
    expect(await sample('40001')).toBe(1);
  });
});
