/**
 * Every SessionService method has an explicit permission: the interceptor treats an unlisted
 * method as admin-only, so a new RPC left out of the table would silently refuse read/append tokens.
 */
import { describe, expect, it } from 'vitest';
import { SessionServiceService } from '../../gen/palimpsest/v1/service.js';
import { METHOD_PERMISSIONS } from '../../src/server/auth.js';

describe('METHOD_PERMISSIONS', () => {
  it('lists every SessionService method, and nothing else', () => {
    const methods = Object.values(SessionServiceService).map((m) => m.path.split('/').pop());
    expect(Object.keys(METHOD_PERMISSIONS).sort()).toEqual([...methods].sort());
  });
});
