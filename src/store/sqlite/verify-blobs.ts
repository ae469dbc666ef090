/**
 * What `palimpsest verify` checks of the blobs (issue #39, migrations/0006-blobs.ts): every
 * blob's bytes against its CRC-32, its SHA-256 digest and its size; its reference count against
 * the references stored events hold; and every reference against its blob (a reference whose blob
 * is missing names the session, the seq and the digest). verify.ts also replays surfaces with
 * the blobbed values put back ({@link inflateForReplay}).
 */
import type Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { BlobDamagedError, inflateData, type StoredBlob } from '../../app/blob-codec.js';
import type { SessionEvent } from '../../domain/event.js';
import { findBlobRefs } from '../../domain/blobs.js';
import { blobCrc } from './sqlite-blobs.js';

/** One problem (verify.ts VerifyProblem). */
type Add = (p: { sessionId?: string; seq?: number; problem: string }) => void;

/** Checks the blob tables inside verify's read transaction. */
export function verifyBlobs(db: Database.Database, add: Add): { blobs: number } {
  let blobs = 0;
  const refs = db.prepare('SELECT COALESCE(SUM(n), 0) FROM event_blobs WHERE tenant = ? AND digest = ?').pluck();
  for (const [tenant, digest, size, crc, count, bytes] of db.prepare('SELECT tenant, digest, size, crc, refs, bytes FROM blobs').raw().iterate() as Iterable<[string, string, number, number, number, Buffer]>) {
    blobs++;
    const name = `blob ${digest} of tenant ${JSON.stringify(tenant)}`;
    if (blobCrc(bytes) !== crc) add({ problem: `${name} fails its checksum` });
    else if (`sha256:${createHash('sha256').update(bytes).digest('hex')}` !== digest) add({ problem: `${name} does not match its digest` });
    if (bytes.byteLength !== size) add({ problem: `${name} has ${bytes.byteLength} bytes, ${size} recorded` });
    const held = refs.get(tenant, digest) as number;
    if (held !== count) add({ problem: `${name} records ${count} references, events hold ${held}` });
  }
  const orphans = db.prepare(
    `SELECT r.session_id, r.seq, r.digest, s.id IS NULL, b.digest IS NULL FROM event_blobs r
     LEFT JOIN sessions s ON s.id = r.session_id LEFT JOIN blobs b ON b.tenant = r.tenant AND b.digest = r.digest
     WHERE s.id IS NULL OR b.digest IS NULL LIMIT 100`,
  ).raw();
  for (const [sessionId, seq, digest, noSession, noBlob] of orphans.iterate() as Iterable<[string, number, string, number, number]>) {
    if (noBlob === 1) add({ sessionId, seq, problem: `event ${seq} references blob ${digest}, which is missing` });
    else if (noSession === 1) add({ sessionId, seq, problem: `a reference to blob ${digest} outlived its session` });
  }
  return { blobs };
}

/** The session's events with their blobbed values put back, for the surface replay (missing or damaged blobs are verifyBlobs' findings: left as references). */
export function inflateForReplay(db: Database.Database, sessionId: string, events: SessionEvent[]): SessionEvent[] {
  const has = db.prepare('SELECT 1 FROM event_blobs WHERE session_id = ? LIMIT 1').pluck().get(sessionId) !== undefined;
  if (!has) return events;
  const blob = db.prepare('SELECT b.bytes FROM sessions s JOIN blobs b ON b.tenant = s.tenant AND b.digest = ? WHERE s.id = ?').pluck();
  const cache = new Map<string, StoredBlob>();
  return events.map((e) => {
    const refs = findBlobRefs(e.data);
    if (refs.length === 0) return e;
    for (const r of refs) {
      if (cache.has(r.digest)) continue;
      const bytes = blob.get(r.digest, sessionId) as Buffer | undefined;
      if (bytes !== undefined) cache.set(r.digest, { bytes });
    }
    try {
      return { ...e, data: inflateData(e.data, cache) };
    } catch (err) {
      if (err instanceof BlobDamagedError) return e;
      throw err;
    }
  });
}
