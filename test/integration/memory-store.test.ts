import { MemoryDatabase, MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { storeContract } from './store-contract.js';

storeContract('MemorySessionStore', {
  open: async () => new MemorySessionStore(),
  commits: (store) => store.stats().commits,
  groupCommit: false,
  database: async () => {
    const database = new MemoryDatabase();
    return { open: async () => new MemorySessionStore({ database }) };
  },
});
