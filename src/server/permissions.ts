/**
 * What an RPC needs from its caller (a permission) and how a transport resolves the caller:
 * shared by the handler table, auth, both transports' adapters and the revocable-call registry.
 */
import type { CallContext } from '../app/session-service.js';

/** The permission an RPC needs. */
export type Permission = 'read' | 'append' | 'admin';

/** A call as a caller resolver sees it, on either port: its method path and request headers. */
export interface CallInfo {
  /** "/palimpsest.v1.SessionService/AppendEvents". */
  readonly path: string;
  /** The first value of a request header (lowercase name), as a string; undefined when absent. */
  header(name: string): string | undefined;
}

/** Resolves the caller of a call (tenant) for its access; throws a DomainError when it is not allowed. */
export type ContextResolver = (call: CallInfo, access: Permission | 'public') => CallContext;
