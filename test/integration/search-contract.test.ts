import { describe, expect, it } from 'vitest';
import { SessionService } from '../../src/app/session-service.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sqlite-store.js';
import { SqliteSearchIndex } from '../../src/store/sqlite/search.js';
import { tempDbDir } from '../support/temp-db.js';
import { ACME, answers, searchContract, writeScenario } from './search-contract.js';

const dirs = tempDbDir('palimpsest-search-');

function clock(): () => number {
  let t = 1_700_000_000_000;
  return () => (t += 1000);
}

async function memoryAnswers(): Promise<Record<string, string[]>> {
  const app = new SessionService(new MemorySessionStore(), undefined, clock());
  await writeScenario(app);
  const out = await answers(app, ACME);
  await app.close();
  return out;
}

describe('search contract', () => {
  it('memory (the reference scan): append, search, delete, search again, tenants apart', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, clock());
    await searchContract(app);
    await app.close();
  });

  it.each(['inline', 'thread'] as const)('SQLite (%s writer) finds what the memory store finds, and forgets a deleted session', async (appendWriter) => {
    const path = dirs.freshPath();
    const app = new SessionService(new SqliteSessionStore({ path, appendWriter }), undefined, clock());
    const index = new SqliteSearchIndex(path);
    app.search.useIndex(index);
    const got = await searchContract(app);
    expect(got).toEqual(await memoryAnswers());
    expect(await index.verifyIndex()).toEqual({ events: 11, problems: [] });
    expect(await index.reindex()).toEqual({ sessions: 4, events: 11 });
    expect(await index.verifyIndex()).toEqual({ events: 11, problems: [] });
    await app.close();
  });
});
