/**
 * Lock order (issue #33): the feed_record trigger becomes a constraint trigger deferred to the
 * commit, so the tenant's feed position is the last lock of every write transaction;
 * append_batch takes every byte-counter shard first when a call checks the quota; create_session
 * locks an existing row of its id (see "Lock order" in ../schema.ts). All of it is in the
 * functions and the trigger, which are replaced from the running build after every migration
 * (../schema.ts functionsSql): this version only makes existing schemas get them.
 */
import type { PostgresMigration } from './migration.js';

export const migration: PostgresMigration = {
  version: 6,
  description: 'lock order (issue #33): the feed record written at commit (deferred constraint trigger), quota shards locked first',
  async up() {
    // Nothing but the version: the trigger and the functions are replaced after the migration.
  },
};
