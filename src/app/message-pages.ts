/**
 * GetMessages page tokens: model history by offset + replace generation (positions are stable
 * until a replace rewrites the surface), transcript by the last seq sent (log order). Opaque to
 * clients (base64url JSON).
 */
import { DomainError } from '../domain/errors.js';

/** A decoded GetMessages page token. */
export interface MessagesToken {
  readonly v: 'm' | 't';
  /** Model history: offset of the next message. */
  readonly o?: number;
  /** Model history: the replace generation the offsets belong to. */
  readonly g?: number;
  /** Transcript: the last seq sent. */
  readonly s?: number;
}

/** Encodes a token. */
export function encodeMessagesToken(t: MessagesToken): string {
  return Buffer.from(JSON.stringify(t)).toString('base64url');
}

/** Decodes a token of the given view, or INVALID_PAGE_TOKEN. */
export function decodeMessagesToken(token: string, transcript: boolean): MessagesToken {
  const nat = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  try {
    const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as Record<string, unknown>;
    if (transcript && t.v === 't' && nat(t.s)) return { v: 't', s: t.s as number };
    if (!transcript && t.v === 'm' && nat(t.o) && nat(t.g)) return { v: 'm', o: t.o as number, g: t.g as number };
  } catch {
    // fall through
  }
  throw new DomainError('INVALID_PAGE_TOKEN', 'page_token is not a GetMessages token of this view; start again without it', { field: 'page_token' });
}

/** PAGE_TOKEN_STALE: a replace rewrote the surface since the first page. */
export function staleMessagesToken(expected: number, actual: number): DomainError {
  return new DomainError('PAGE_TOKEN_STALE', 'a replace rewrote the surface since the first page; read the model history again from the start', {
    field: 'page_token', expectedGeneration: String(expected), actualGeneration: String(actual),
  });
}
