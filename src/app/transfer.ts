/**
 * Moving whole sessions: fork (a child from a prefix, dsh-semantics 5.5), streamed JSONL import
 * (the session stays pending, owned by this service with a renewed lease, until the whole file
 * validated and stored; any failure deletes it) and export (packed chunk rows unless unpacked).
 */
import { randomUUID } from 'node:crypto';
import type { CandidateEvent, SessionEvent, SessionHeader } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { dataDependencies } from '../domain/replace-chains.js';
import { SessionEngine, type BatchPlan } from '../domain/session-engine.js';
import { PairingIndex } from '../domain/tool-pairing.js';
import { planFork } from '../domain/fork.js';
import { JsonlDecoder, assertUncompressed } from '../domain/jsonl-reader.js';
import { JsonlCommittedLines } from '../domain/jsonl-committed-lines.js';
import { checkEventTypes, checkLabels } from './input-limits.js';
import { JsonlEncoder } from '../domain/jsonl-writer.js';
import { STORE_READ_BATCH, checkId, type AppLimits, type CallContext, type SessionView } from './app-types.js';
import { MAX_JSON_DEPTH, jsonTextDepth } from '../domain/json-depth.js';
import { byteQuota, createWithQuota, quotaError } from './quotas.js';
import type { Reads } from './reads.js';
import type { SessionCache } from './session-cache.js';
import { type NewSession, type PublishMetadata, type SessionStore } from './store-port.js';
import { labelsBytesDelta } from '../domain/session-bytes.js';
import { hasMetadata, metadataTrailer, readMetadataTrailer } from '../domain/metadata-trailer.js';
import { storageKey, toStored } from './tenant-scope.js';

/** How long an import's pending session stays owned without a new chunk (ms). */
const IMPORT_LEASE_MS = 5 * 60_000;

/** Fork, import and export. */
export class Transfer {
  constructor(
    private readonly store: SessionStore,
    private readonly cache: SessionCache,
    private readonly reads: Reads,
    private readonly limits: AppLimits,
    private readonly clock: () => number,
    private readonly newId: () => string,
    /** Owner of this service's pending imports (see NewSession.pending). */
    private readonly instanceId: string,
  ) {}
  /** Forks a session at a boundary (dsh-semantics 5.5). */
  async fork(ctx: CallContext, id: string, req: { atSeq?: number; childId?: string; labels?: Record<string, string> }): Promise<SessionView> {
    const childId = req.childId || this.newId();
    checkId(childId);
    checkLabels(req.labels);
    if (await this.store.getSession(storageKey(ctx.tenant, childId))) {
      throw new DomainError('SESSION_ALREADY_EXISTS', `session ${JSON.stringify(childId)} already exists`, { sessionId: childId });
    }
    const rec = await this.cache.record(ctx, id);
    const prefix: SessionEvent[] = [];
    for await (const batch of this.cache.scan(storageKey(ctx.tenant, id), id, rec, 0)) {
      for (const e of batch) prefix.push(e);
      const last = batch[batch.length - 1];
      if (req.atSeq !== undefined && last && last.seq > req.atSeq) break;
    }
    const plan = planFork({ header: rec.header, events: prefix }, { childId, createdAt: this.clock(), boundary: req.atSeq });
    const engine = SessionEngine.create({ strict: rec.strict });
    // The source was accepted already; an imported source may have seq gaps.
    const batch = engine.plan(plan.events as unknown as CandidateEvent[], { mode: 'import', now: this.clock, sessionId: childId, lookup: () => undefined, allowSeqGaps: true });
    await createWithQuota(this.store, this.limits, ctx, childId, { header: toStored(ctx.tenant, plan.header), labels: req.labels ?? {}, tenant: ctx.tenant, strict: rec.strict, pairingGuard: rec.pairingGuard, writer: randomUUID() }, batch.events);
    return this.reads.getSession(ctx, childId);
  }


  /**
   * Imports a reference JSONL file streamed as byte chunks. The session stays pending (invisible)
   * until the whole file validated and stored; any failure deletes it. As the reference loads a
   * file, only committed (newline-terminated) lines count: an uncommitted tail is left out and its
   * size returned (`uncommittedTailBytes`).
   */
  async importJsonl(ctx: CallContext, chunks: AsyncIterable<Uint8Array>, opts: { id?: string; labels?: Record<string, string>; strict?: boolean; allowSeqGaps?: boolean; pairingGuard?: boolean }): Promise<SessionView & { uncommittedTailBytes: number }> {
    checkLabels(opts.labels);
    const decoder = new JsonlDecoder();
    // A line holds one event (or one packed chunk row): bound it by the event size limit plus
    // room for the envelope, so a file without newlines cannot make the server buffer it all.
    const splitter = new JsonlCommittedLines(this.limits.maxEventBytes + 64 * 1024);
    let tailBytes = 0;
    let engine: SessionEngine | undefined;
    // With the tool-pairing guard on, the file is checked like live appends (pairing-guard.ts).
    let importPairing: PairingIndex | undefined;
    let id = '';
    let created = false;
    let pending: CandidateEvent[] = [];
    /** A metadata trailer candidate (issue #35, metadata-trailer.ts) and its line. */
    let held: { event: CandidateEvent; line: number } | undefined;
    const firstLine = 0;
    let first = true;
    const lineOf: number[] = [];
    const flush = async (): Promise<void> => {
      if (!engine || pending.length === 0) return;
      // The engine keeps the structure of the whole imported prefix across chunks; the data a
      // tool/result replace compares with its target (rule 2.4) is read back from the chunks
      // already stored, only for the seqs this chunk needs (memory stays bounded by a chunk).
      const deps = dataDependencies(engine, pending);
      const earlier = new Map<number, SessionEvent>();
      if (deps.length > 0) for (const e of await this.store.getPendingEvents(storageKey(ctx.tenant, id), this.instanceId, deps)) earlier.set(e.seq, e);
      let plan: BatchPlan;
      try {
        // The failing line is attached below (the index inside this flush means nothing to the client).
        checkEventTypes(pending, () => 'type');
        plan = engine.plan(pending, { mode: 'import', now: this.clock, sessionId: id, lookup: (seq) => earlier.get(seq), allowSeqGaps: opts.allowSeqGaps, referenceLoad: true, pairing: importPairing?.lookup });
      } catch (e) {
        if (e instanceof DomainError && e.index !== undefined) {
          // The position inside this internal flush batch means nothing to the client: the line does.
          const line = lineOf[e.index] ?? firstLine;
          const { index: _index, ...metadata } = e.metadata;
          throw new DomainError(e.reason, `line ${line}: ${e.message.replace(/^event \d+ of the batch: /, '')}`, { ...metadata, line: String(line) });
        }
        throw e;
      }
      engine.commit(plan);
      importPairing?.apply(plan);
      pending = [];
      lineOf.length = 0;
      const quota = byteQuota(this.limits, ctx.tenant);
      const outcome = await this.store.appendPending(storageKey(ctx.tenant, id), plan.events, {
        owner: this.instanceId, leaseUntil: this.clock() + IMPORT_LEASE_MS, ...(quota ? { quota } : {}),
      });
      if (outcome.kind === 'quota-exceeded') throw quotaError(ctx.tenant, outcome);
    };
    const lines = async (text: string[]): Promise<void> => {
      for (const line of text) {
        // The record envelope adds one level to its data's depth (see json-depth.ts).
        if (jsonTextDepth(line) > MAX_JSON_DEPTH + 1) {
          const n = decoder.lineNumber + 1;
          throw new DomainError('DATA_TOO_DEEP', `line ${n}: the record nests deeper than ${MAX_JSON_DEPTH} levels of data`, { line: String(n), limit: String(MAX_JSON_DEPTH) });
        }
        const events = decoder.push(line);
        if (!engine && decoder.header) {
          const header = decoder.header;
          id = opts.id || header.id;
          checkId(id);
          const finalHeader: SessionHeader = { ...header, id };
          const rec: NewSession = {
            header: toStored(ctx.tenant, finalHeader), labels: opts.labels ?? {}, tenant: ctx.tenant, strict: opts.strict ?? false,
            pairingGuard: opts.pairingGuard ?? false, writer: randomUUID(), pending: { owner: this.instanceId, leaseUntil: this.clock() + IMPORT_LEASE_MS },
          };
          await createWithQuota(this.store, this.limits, ctx, id, rec, []);
          created = true;
          engine = SessionEngine.create({ strict: opts.strict ?? false });
          if (opts.pairingGuard === true) {
            importPairing = new PairingIndex(id);
            importPairing.hydrate([], 0);
          }
        }
        for (const e of events) {
          // A metadata trailer counts only as the file's last event: held back until another follows.
          if (held !== undefined) {
            pending.push(held.event);
            lineOf.push(held.line);
            held = undefined;
          }
          if (readMetadataTrailer(e) !== undefined) held = { event: e, line: decoder.lineNumber };
          else {
            pending.push(e);
            lineOf.push(decoder.lineNumber);
          }
        }
        if (pending.length >= STORE_READ_BATCH) await flush();
      }
    };
    try {
      const feed = async (chunk: Uint8Array): Promise<void> => {
        await lines(splitter.push(chunk));
      };
      // The zstd magic is checked on the first 4 bytes however the client chunked them.
      let head: Uint8Array = new Uint8Array(0);
      for await (const part of chunks) {
        if (!first) {
          await feed(part);
          continue;
        }
        head = head.length === 0 ? part : Buffer.concat([head, part]);
        if (head.length < 4) continue;
        assertUncompressed(head);
        first = false;
        await feed(head);
      }
      if (first && head.length > 0) await feed(head);
      tailBytes = splitter.end();
      decoder.finish(tailBytes);
      await flush();
      // The file's last event was its metadata trailer: labels (the request's win) and the
      // pairing guard (the request's when given) are set as the session becomes visible.
      const trailer = held === undefined ? undefined : readMetadataTrailer(held.event);
      let metadata: PublishMetadata | undefined;
      if (trailer !== undefined) {
        const labels = { ...trailer.labels, ...(opts.labels ?? {}) };
        checkLabels(labels);
        metadata = { labels, pairingGuard: opts.pairingGuard ?? trailer.pairingGuard, bytesDelta: labelsBytesDelta(opts.labels ?? {}, labels) };
      }
      await this.store.publishSession(storageKey(ctx.tenant, id), this.instanceId, metadata);
    } catch (e) {
      // Only our own pending session: after a lease sweep the id may be someone else's live session.
      if (created) await this.store.deletePending(storageKey(ctx.tenant, id), this.instanceId).catch(() => undefined);
      throw e;
    }
    return { ...(await this.reads.getSession(ctx, id)), uncommittedTailBytes: tailBytes };
  }

  /**
   * Exports a session as reference JSONL lines (packed chunk rows unless `unpacked`), with its
   * labels and pairing guard in a metadata trailer when it has any (metadata-trailer.ts).
   */
  async *exportJsonl(ctx: CallContext, id: string, opts: { unpacked?: boolean; blobRefs?: boolean } = {}): AsyncGenerator<string[]> {
    const rec = await this.cache.record(ctx, id);
    const enc = new JsonlEncoder(rec.header, { packChunks: !opts.unpacked });
    yield [enc.headerLine()];
    let last: SessionEvent | undefined;
    for await (const batch of this.cache.scan(storageKey(ctx.tenant, id), id, rec, 0, opts.blobRefs === true)) {
      const out: string[] = [];
      for (const e of batch) for (const l of enc.push(e)) out.push(l);
      last = batch[batch.length - 1] ?? last;
      if (out.length > 0) yield out;
    }
    // Labels and the pairing guard travel as the file's last event (metadata-trailer.ts).
    const meta = { labels: rec.labels, pairingGuard: rec.pairingGuard };
    const tail = hasMetadata(meta) ? enc.push(metadataTrailer(meta, last === undefined ? 0 : last.seq + 1, last?.time ?? rec.header.createdAt)) : [];
    tail.push(...enc.end());
    if (tail.length > 0) yield tail;
  }

}
