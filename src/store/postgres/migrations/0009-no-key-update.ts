/**
 * Version 9: appends, import chunks and label updates lock their session row FOR NO KEY UPDATE
 * instead of FOR UPDATE (see "Lock order" in ../schema.ts). The search follower reads the rows of
 * its batch FOR KEY SHARE, which FOR UPDATE conflicts with: every append to a session in the
 * follower's batch waited for the batch to commit, and an append group locking sessions of two
 * tenants could deadlock with it. All of it is in the functions, which are replaced from the
 * running build after every migration (../schema.ts functionsSql): this version only makes
 * existing schemas get them.
 */
import type { PostgresMigration } from './migration.js';

export const migration: PostgresMigration = {
  version: 9,
  description: 'appends lock their session row FOR NO KEY UPDATE (the search follower\'s FOR KEY SHARE no longer holds them back)',
  async up() {
    // Nothing but the version: the functions are replaced after the migration.
  },
};
