/**
 * Long-running calls other than subscriptions (which re-check themselves, see
 * subscribe-handlers.ts) that a token file reload must end when their token was revoked or lost
 * the permission: ExportSession streams. A handler registers its call with the token hash the
 * interceptor verified; `recheck` tells it to stop, and the handler ends the call itself (so its
 * generator and buffers are released exactly as on a cancel).
 */
import { DomainError } from '../domain/errors.js';
import type { Permission } from './permissions.js';

/** One tracked call. */
export interface RevocableCall {
  /** SHA-256 of the call's token (see auth.ts CREDENTIAL_KEY). */
  readonly credential: string;
  readonly tenant: string;
  readonly permission: Permission;
  /** Called once with the error to end the call with. */
  revoke(err: DomainError): void;
}

/** The tracked calls. */
export class RevocableCalls {
  readonly #open = new Set<RevocableCall>();

  /** Tracks a call until the returned function is called; calls without a token are not tracked. */
  add(c: RevocableCall): () => void {
    if (c.credential === '') return () => undefined;
    this.#open.add(c);
    return () => this.#open.delete(c);
  }

  /** Open tracked calls (tests). */
  get size(): number {
    return this.#open.size;
  }

  /** Revokes the calls whose token is gone or no longer grants their permission for their tenant. */
  recheck(lookup: (credential: string) => { readonly tenant: string; readonly permissions: readonly Permission[] } | undefined): number {
    let ended = 0;
    for (const c of [...this.#open]) {
      const token = lookup(c.credential);
      const granted = token !== undefined && (token.permissions.includes(c.permission) || token.permissions.includes('admin'));
      if (granted && token.tenant === c.tenant) continue;
      this.#open.delete(c);
      c.revoke(token === undefined
        ? new DomainError('UNAUTHENTICATED', 'the bearer token of this call was revoked (token file reloaded); retry with a valid token', {})
        : new DomainError('PERMISSION_DENIED', `the bearer token of this call no longer grants ${c.permission} for its tenant (token file reloaded)`, { permission: c.permission }));
      ended++;
    }
    return ended;
  }
}
