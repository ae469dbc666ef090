/**
 * Bearer-token authentication and per-RPC permissions, enforced by the gRPC port's server
 * interceptor (grpc/admission-call.ts) and the web port's adapter.
 *
 * Tokens come from a JSON file the operator manages; only SHA-256 hashes are stored:
 *
 *   { "tokens": [ { "name": "agent-backend", "sha256": "<hex>", "tenant": "acme",
 *                   "permissions": ["read", "append"] } ] }
 *
 * The interceptor authenticates every call except health and reflection, checks the method's
 * permission, strips any client-sent `x-palimpsest-*` metadata and passes the verified tenant to
 * the handlers in `x-palimpsest-tenant`. The file is re-read on `reload()` (SIGHUP); a bad file
 * keeps the previous tokens and is reported. Existing connections are never dropped.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Metadata, status as Code } from '@grpc/grpc-js';
import { DomainError } from '../domain/errors.js';
import type { CallContext } from '../app/session-service.js';
import { ANONYMOUS } from '../app/session-service.js';
import type { ContextResolver, Permission } from './permissions.js';

/** One configured token. */
export interface TokenEntry {
  readonly name: string;
  readonly sha256: string;
  readonly tenant: string;
  readonly permissions: readonly Permission[];
}

/** Metadata key carrying the verified tenant from the interceptor to the handlers. */
export const TENANT_KEY = 'x-palimpsest-tenant';

/**
 * Metadata key carrying the SHA-256 of the verified token (never the token) to the handlers, so
 * that long-lived streams can be re-checked when the token file is reloaded.
 */
export const CREDENTIAL_KEY = 'x-palimpsest-credential';

/** The verified token hash of a call ('' without auth). */
export function credentialOf(metadata: Metadata): string {
  const v = metadata.get(CREDENTIAL_KEY)[0];
  return typeof v === 'string' ? v : '';
}

/** Whether an entry grants `needed` (admin implies every permission). */
export function grants(entry: Pick<TokenEntry, 'permissions'>, needed: Permission): boolean {
  return entry.permissions.includes(needed) || entry.permissions.includes('admin');
}

const PERMISSIONS: readonly Permission[] = ['read', 'append', 'admin'];

/** The permission each SessionService method needs. */
export const METHOD_PERMISSIONS: Readonly<Record<string, Permission>> = {
  CreateSession: 'append',
  GetSession: 'read',
  ListSessions: 'read',
  DeleteSession: 'admin',
  AppendEvents: 'append',
  AppendStream: 'append',
  ListEvents: 'read',
  GetSurface: 'read',
  GetMessages: 'read',
  ForkSession: 'append',
  RepairSession: 'append',
  ImportSession: 'append',
  ExportSession: 'read',
  SubscribeSurface: 'read',
  SubscribeEvents: 'read',
  SubscribeSessions: 'read',
  UpdateSession: 'append',
  PlanCompaction: 'read',
  Compact: 'append',
  PruneToolResults: 'append',
  ImportMessages: 'append',
  GetBlob: 'read',
  SearchEvents: 'read',
};

/** Services reachable without a token: health checks and schema reflection (public contract). */
const PUBLIC_PREFIXES = ['/grpc.health.v1.Health/', '/grpc.reflection.v1.ServerReflection/', '/grpc.reflection.v1alpha.ServerReflection/'];

/** Whether a method path ("/grpc.health.v1.Health/Check") is reachable without a token. */
export function isPublicPath(path: string): boolean {
  return PUBLIC_PREFIXES.some((p) => path.startsWith(p));
}

/** SHA-256 hex of a token, as stored in the token file. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** Parses and validates a token file's JSON text. */
export function parseTokenFile(text: string, path: string): TokenEntry[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`token file ${path} is not JSON: ${(e as Error).message}`);
  }
  const tokens = (raw as { tokens?: unknown }).tokens;
  if (!Array.isArray(tokens)) throw new Error(`token file ${path} must be {"tokens": [...]}`);
  return tokens.map((t: unknown, i) => {
    const e = t as Record<string, unknown>;
    const where = `token file ${path}, tokens[${i}]`;
    if (typeof e.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(e.sha256)) throw new Error(`${where}: sha256 must be 64 lowercase hex digits (palimpsest token hash)`);
    if (typeof e.tenant !== 'string' || !/^[A-Za-z0-9._:-]{1,64}$/.test(e.tenant)) throw new Error(`${where}: tenant must be 1-64 characters of [A-Za-z0-9._:-]`);
    if (!Array.isArray(e.permissions) || e.permissions.some((p) => !PERMISSIONS.includes(p as Permission))) {
      throw new Error(`${where}: permissions must be a list of ${PERMISSIONS.join(', ')}`);
    }
    return { name: typeof e.name === 'string' ? e.name : `tokens[${i}]`, sha256: e.sha256, tenant: e.tenant, permissions: e.permissions as Permission[] };
  });
}

/** The live set of tokens, reloadable. */
export class TokenRegistry {
  #byHash = new Map<string, TokenEntry>();

  constructor(readonly path: string) {
    this.reload();
  }

  /** Number of tokens loaded. */
  get size(): number {
    return this.#byHash.size;
  }

  /** Re-reads the file; on error keeps the previous tokens and throws. */
  reload(): void {
    const entries = parseTokenFile(readFileSync(this.path, 'utf8'), this.path);
    const next = new Map<string, TokenEntry>();
    for (const e of entries) next.set(e.sha256, e);
    this.#byHash = next;
  }

  /** The entry with this token hash (as in the file), or undefined. */
  byHash(sha256: string): TokenEntry | undefined {
    return this.#byHash.get(sha256);
  }

  /** The entry of a presented token, or undefined. */
  verify(token: string): TokenEntry | undefined {
    const h = hashToken(token);
    const e = this.#byHash.get(h);
    // The map lookup is on the hash, which leaks nothing useful; compare again in constant time
    // for defence in depth.
    if (!e || !timingSafeEqual(Buffer.from(e.sha256, 'hex'), Buffer.from(h, 'hex'))) return undefined;
    return e;
  }
}

/**
 * The bearer-token check of one call to SessionService method `method` (gRPC interceptor and
 * web port alike): the verified token, or a DomainError UNAUTHENTICATED / PERMISSION_DENIED.
 */
export function authenticate(registry: TokenRegistry, authorization: string | undefined, method: string): TokenEntry {
  const m = authorization === undefined ? null : /^Bearer\s+(\S+)$/i.exec(authorization);
  if (!m) throw new DomainError('UNAUTHENTICATED', 'missing bearer token: send metadata "authorization: Bearer <token>"', {});
  const entry = registry.verify(m[1] as string);
  if (!entry) throw new DomainError('UNAUTHENTICATED', 'the bearer token is not valid (unknown, revoked or mistyped)', {});
  const needed = METHOD_PERMISSIONS[method] ?? 'admin';
  if (!grants(entry, needed)) {
    throw new DomainError('PERMISSION_DENIED', `token "${entry.name}" lacks the ${needed} permission needed by ${method}`, { permission: needed, method });
  }
  return entry;
}

/**
 * Puts the verified caller on a call's metadata for the handlers: the tenant, and the token hash
 * that token reloads re-check long-lived calls by (both ports).
 */
export function setCaller(md: Metadata, entry: TokenEntry): void {
  md.set(TENANT_KEY, entry.tenant);
  md.set(CREDENTIAL_KEY, entry.sha256);
}

/** The error of a call over the per-connection cap. */
export function tooManyStreams(limit: number): DomainError {
  return new DomainError('TOO_MANY_STREAMS',
    `this connection already has ${limit} calls in flight; the limit is ${limit}; wait for some to finish or open another connection`,
    { limitName: 'max_concurrent_streams', limit: String(limit), actual: String(limit + 1) });
}

/** An admitted call: release it from the connection's cap when it ends; `caller` is the verified token (undefined without auth and for public methods). */
export interface AdmittedCall {
  readonly release: () => void;
  readonly caller: TokenEntry | undefined;
}

/**
 * Admission of one call, on both ports (the grpc-js interceptor, the web port's adapter): the per-connection cap on calls in flight (public calls count too: no
 * connection gets unbounded streams), then, when auth is on and the method is not public, the
 * bearer token and the method's permission. Returns the verified token (undefined without auth
 * and for public methods); the call is then counted in `limiter` until `limiter.leave(connection)`.
 * Throws the DomainError to refuse the call with (TOO_MANY_STREAMS, UNAUTHENTICATED,
 * PERMISSION_DENIED); nothing is held after a refusal.
 */
export function enterCall(limiter: StreamLimiter, registry: TokenRegistry | undefined, connection: string, method: string, isPublic: boolean, authorization: string | undefined): TokenEntry | undefined {
  if (!limiter.enter(connection)) throw tooManyStreams(limiter.maxPerConnection);
  if (!registry || isPublic) return undefined;
  try {
    return authenticate(registry, authorization, method);
  } catch (e) {
    limiter.leave(connection);
    throw e;
  }
}

/** `enterCall` with a release function (idempotent) instead of `limiter.leave`. */
export function admitCall(limiter: StreamLimiter, registry: TokenRegistry | undefined, connection: string, method: string, isPublic: boolean, authorization: string | undefined): AdmittedCall {
  const caller = enterCall(limiter, registry, connection, method, isPublic, authorization);
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    limiter.leave(connection);
  };
  return { release, caller };
}

/** The per-connection concurrent-call cap, enforced with its limit in the error. */
export class StreamLimiter {
  readonly #active = new Map<string, number>();
  constructor(readonly maxPerConnection: number) {}

  /** Counts a call of a connection in; false (nothing counted) when the connection is at its cap. */
  enter(connection: string): boolean {
    const n = this.#active.get(connection) ?? 0;
    if (n >= this.maxPerConnection) return false;
    this.#active.set(connection, n + 1);
    return true;
  }

  /** Counts a call counted in by `enter` out (exactly once per call). */
  leave(connection: string): void {
    const m = (this.#active.get(connection) ?? 1) - 1;
    if (m <= 0) this.#active.delete(connection);
    else this.#active.set(connection, m);
  }

  /** Active calls of a connection (tests). */
  active(connection: string): number {
    return this.#active.get(connection) ?? 0;
  }
}

/** Handler-side resolution of the caller: the tenant admission verified ('' without auth). */
export function metadataResolver(authEnabled: boolean): ContextResolver {
  return (call, access) => {
    if (!authEnabled || access === 'public') return ANONYMOUS;
    const t = call.header(TENANT_KEY);
    if (t === undefined || t === '') {
      // Unreachable when the interceptor runs; fail closed.
      throw new DomainError('UNAUTHENTICATED', 'no verified caller', {});
    }
    const ctx: CallContext = { tenant: t };
    return ctx;
  };
}

/** Status code of auth failures (for docs/tests). */
export const AUTH_CODES = { unauthenticated: Code.UNAUTHENTICATED, denied: Code.PERMISSION_DENIED } as const;
