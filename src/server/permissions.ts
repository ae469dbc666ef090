/**
 * What an RPC needs from its caller (a permission) and how a transport resolves the caller (the
 * auth interceptor's resolver): shared by the handlers, auth and the revocable-call registry.
 */
import type { Metadata } from '@grpc/grpc-js';
import type { CallContext } from '../app/session-service.js';

/** The permission an RPC needs. */
export type Permission = 'read' | 'append' | 'admin';

/** Resolves the caller of a call (tenant) for a permission; throws when it is not allowed. */
export type ContextResolver = (call: { metadata: Metadata; getPath?: () => string }, permission: Permission) => CallContext;
