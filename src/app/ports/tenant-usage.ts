/** Store port, tenant usage role: the per-tenant counters that quotas are checked against. */

/** A tenant's stored counters. */
export interface TenantUsage {
  /** Sessions, pending ones included. */
  readonly sessions: number;
  /** Bytes counted toward the byte quota (see SessionRecord.dataBytes). */
  readonly dataBytes: number;
}

/** A quota a write would exceed (nothing was written). `actual` is the count or size the write would reach. */
export interface QuotaExceeded {
  readonly kind: 'quota-exceeded';
  readonly limitName: 'tenant_max_sessions' | 'tenant_max_bytes';
  readonly limit: number;
  readonly actual: number;
}

/**
 * A tenant byte quota of a write (0 = unlimited). `tenant` is the session's tenant; the store checks
 * the counter of the tenant the session is stored under (the same one), inside the transaction.
 */
export interface ByteQuota {
  readonly tenant: string;
  readonly maxBytes: number;
}

/** Tenant quotas checked by createSession (0 = unlimited). Pending sessions count toward `maxSessions`. */
export interface CreateQuota {
  readonly maxSessions: number;
  readonly maxBytes: number;
}

/** The tenant usage role of the store port. */
export interface TenantUsageReads {
  /** A tenant's stored counters (metrics, tests). */
  getTenantUsage(tenant: string): Promise<TenantUsage>;
  /** Optional (metrics): the stored session count of every tenant that has a counter row. */
  tenantSessionCounts?(): Promise<ReadonlyMap<string, number>>;
}
