/**
 * Per-tenant session ids. With authentication on, every session belongs to a tenant and its id
 * is only meaningful inside that tenant: the store, the hot-session cache and the change feed key
 * it as `<tenant>/<id>`. Ids and tenant names cannot contain '/', so the key is unambiguous. With
 * authentication off (tenant ''), the key is the id itself.
 *
 * The stored header carries the key as its `id`; records read back are turned into the client's
 * view (the plain id) before anything else sees them. Everything the client can observe (session
 * ids, exported headers, legacy message ids derived from the id) uses the plain id.
 */
import type { SessionHeader } from '../domain/event.js';
import type { SessionRecord } from './store-port.js';

/** The storage key of a tenant's session id. */
export function storageKey(tenant: string, id: string): string {
  return tenant === '' ? id : `${tenant}/${id}`;
}

/** A header as stored: its id becomes the storage key. */
export function toStored(tenant: string, header: SessionHeader): SessionHeader {
  return { ...header, id: storageKey(tenant, header.id) };
}

/** A stored record as the client sees it: the header id without the tenant prefix. */
export function fromStored(rec: SessionRecord): SessionRecord {
  if (rec.tenant === '') return rec;
  const prefix = `${rec.tenant}/`;
  if (!rec.header.id.startsWith(prefix)) return rec;
  return { ...rec, header: { ...rec.header, id: rec.header.id.slice(prefix.length) } };
}
