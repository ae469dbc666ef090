/**
 * Tenant quotas. The store checks them against its per-tenant counters inside the transaction of
 * the write they guard (see the store port), so concurrent writers cannot exceed them; the app
 * passes the limits and turns a quota outcome into QUOTA_EXCEEDED with the limit and the actual
 * count or size.
 */
import type { SessionEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import type { AppLimits, CallContext } from './app-types.js';
import type { ByteQuota, NewSession, QuotaExceeded, SessionStore } from './store-port.js';

/** The QUOTA_EXCEEDED error of a store's quota outcome (same reason and metadata for sessions and bytes). */
export function quotaError(tenant: string, q: QuotaExceeded): DomainError {
  const message = q.limitName === 'tenant_max_sessions'
    ? `tenant ${JSON.stringify(tenant)} has reached its limit of ${q.limit} sessions; delete sessions or raise the quota`
    : `tenant ${JSON.stringify(tenant)} would store ${q.actual} bytes; the limit is ${q.limit}; delete sessions or raise the quota`;
  return new DomainError('QUOTA_EXCEEDED', message, { limitName: q.limitName, limit: String(q.limit), actual: String(q.actual), tenant });
}

/** The byte quota of an append or import chunk of `tenant`'s session (undefined = unlimited). */
export function byteQuota(limits: AppLimits, tenant: string): ByteQuota | undefined {
  return limits.tenantMaxBytes > 0 ? { tenant, maxBytes: limits.tenantMaxBytes } : undefined;
}

/**
 * Creates a session (client id `id`) with the tenant's quotas checked in the store's transaction.
 *
 * @throws DomainError SESSION_ALREADY_EXISTS, QUOTA_EXCEEDED
 */
export async function createWithQuota(store: SessionStore, limits: AppLimits, ctx: CallContext, id: string, rec: NewSession, events: readonly SessionEvent[]): Promise<void> {
  const outcome = await store.createSession(rec, events, { maxSessions: limits.tenantMaxSessions, maxBytes: limits.tenantMaxBytes });
  if (outcome.kind === 'created') return;
  if (outcome.kind === 'exists') throw new DomainError('SESSION_ALREADY_EXISTS', `session ${JSON.stringify(id)} already exists`, { sessionId: id });
  throw quotaError(ctx.tenant, outcome);
}
