/**
 * Session-list page tokens shared by every store: an opaque base64url encoding of the
 * (createdAt, id) position of the last session returned. Keyset pagination on the list order
 * (createdAt desc, id desc) is stable under concurrent inserts and deletes: a page never repeats
 * or skips a session that existed for the whole listing.
 */
import { DomainError } from '../domain/errors.js';

/** A decoded page position: list strictly after (older than) this session. */
export interface PagePosition {
  readonly createdAt: number;
  readonly id: string;
}

/** Encodes the position of the last session of a page. */
export function encodePageToken(position: PagePosition): string {
  return Buffer.from(JSON.stringify([position.createdAt, position.id]), 'utf8').toString('base64url');
}

/** Decodes a page token; throws DomainError `INVALID_PAGE_TOKEN` when it was not produced by {@link encodePageToken}. */
export function decodePageToken(token: string): PagePosition {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (
    Array.isArray(parsed) &&
    parsed.length === 2 &&
    Number.isSafeInteger(parsed[0]) &&
    (parsed[0] as number) >= 0 &&
    typeof parsed[1] === 'string'
  ) {
    return { createdAt: parsed[0] as number, id: parsed[1] };
  }
  throw new DomainError('INVALID_PAGE_TOKEN', 'page_token is not a token returned by a previous list call; start again without it', {
    pageToken: token.slice(0, 64),
  });
}

/** Validates a page size (the app layer applies defaults and maxima; the store only refuses nonsense). */
export function checkPageSize(pageSize: number): void {
  if (!Number.isSafeInteger(pageSize) || pageSize < 1) {
    throw new RangeError(`pageSize must be a positive integer, got ${pageSize}`);
  }
}
