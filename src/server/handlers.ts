/**
 * The SessionService handler table (rpc/handler-table.ts): decode requests, call the app, encode
 * responses. The transports' adapters (src/server/grpc, src/server/web) run it and map errors.
 */
import type { CallContext, SessionService, SessionView } from '../app/session-service.js';
import { DomainError } from '../domain/errors.js';
import type { CandidateEvent, SessionEvent } from '../domain/event.js';
import type { ParsedJsonText } from '../domain/json.js';
import type { StoredEventText } from '../app/store-port.js';
import type {
  AppendEventsRequest, AppendEventsResponse, CreateSessionRequest, CreateSessionResponse, DeleteSessionRequest,
  DeleteSessionResponse, ExportSessionRequest, ExportSessionResponse, ForkSessionRequest, ForkSessionResponse,
  GetMessagesRequest, GetSessionRequest, GetSessionResponse, GetSurfaceRequest, GetSurfaceResponse,
  ImportSessionRequest, ImportSessionResponse, ListEventsRequest, ListEventsResponse, ListSessionsRequest,
  ListSessionsResponse, RepairSessionRequest, RepairSessionResponse,
} from '../../gen/palimpsest/v1/service.js';
import { DataFormat, Direction, GetMessagesResponse, MessageView } from '../../gen/palimpsest/v1/service.js';
import type { Session } from '../../gen/palimpsest/v1/session.js';
import { SessionEvent as PbSessionEventCodec, type SessionEvent as PbSessionEvent } from '../../gen/palimpsest/v1/event.js';
import { encodeAppendEventsResponse, encodeListEventsResponse, fastEncodable, listEventsResponseOf, type EventWithText } from './wire/event-encode.js';
import { EVENT_PAGE_FORMAT, pageEventBytes } from './wire/event-page.js';
import { eventInputToCandidate, eventToProto, sessionToProto, storedEventToProto } from './convert.js';
import { messageFromJson } from './typed-data.js';
import { findBlobRefs } from '../domain/blobs.js';
import { messageJsonText } from '../domain/derive.js';
import { pipeStream } from './server-stream.js';
import { NO_METRICS, type Metrics } from './metrics.js';
import type { RevocableCalls } from './revocable-calls.js';
import { compactionHandlers, withSessionTokens } from './compaction-handlers.js';
import { estimateMessageTokens } from '../domain/token-estimate.js';
import { modelHistoryResponse } from './model-history-response.js';

/** (Re-exported for tests.) */
export { modelHistoryResponse };
import { appendStreamHandler, type BatchOrder } from './append-stream-handler.js';
import { clientStream, serverStream, unary, type HandlerTable } from './rpc/handler-table.js';
import { feedHandlers } from './feed-handlers.js';
import { blobHandlers } from './blob-handlers.js';
import { searchHandlers } from './search-handlers.js';
import { providerFormatOf, providerHandlers, renderedMessages } from './provider-handlers.js';

function toSession(v: SessionView): Session {
  return sessionToProto(v.record, v.surfaceLength, v);
}

/** Encodes a page token (opaque to clients). */
export function encodePageToken(seq: number, direction: 'forward' | 'backward'): string {
  return Buffer.from(JSON.stringify({ s: seq, d: direction[0] })).toString('base64url');
}

function decodePageToken(token: string): { seq: number; direction: 'forward' | 'backward' } {
  try {
    const v = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { s?: unknown; d?: unknown };
    if (typeof v.s === 'number' && Number.isSafeInteger(v.s) && v.s >= 0 && (v.d === 'f' || v.d === 'b')) {
      return { seq: v.s, direction: v.d === 'f' ? 'forward' : 'backward' };
    }
  } catch {
    // fall through
  }
  throw new DomainError('INVALID_PAGE_TOKEN', 'page_token is not a token this server issued; start again without it', { field: 'page_token' });
}

function requireId(id: string, field = 'session_id'): string {
  if (!id) throw new DomainError('INVALID_ARGUMENT', `${field} is required`, { field });
  return id;
}

/** The SessionService handler table (both ports serve it: src/server/grpc, src/server/web). */
export function makeHandlers(app: SessionService, metrics?: Metrics, streams?: HandlerTable, opts: { maxMessageBytes?: number; revocable?: RevocableCalls; onUnexpected?: (err: unknown) => void; heartbeatMs?: number } = {}): HandlerTable {
  // Room for the response envelope and the estimate's slack.
  const pageBudget = Math.max(Math.floor((opts.maxMessageBytes ?? Number.MAX_SAFE_INTEGER) * 0.9) - 4096, 1);
  // The append latency is measured only when metrics are recorded (NO_METRICS drops it).
  const timed = metrics !== undefined && metrics !== NO_METRICS;

  /** One AppendEvents batch (the unary call and each batch of AppendStream). */
  async function appendBatch(caller: CallContext, r: AppendEventsRequest, order?: BatchOrder): Promise<{ seqs: readonly number[]; replayed: boolean; surfaceLength: number }> {
    const started = timed ? process.hrtime.bigint() : 0n;
    const id = requireId(r.sessionId);
    const candidates: CandidateEvent[] = [];
    const sizes: number[] = [];
    // The json form's data is parsed here and handed to the domain with what its text says.
    const parsedData: (ParsedJsonText | undefined)[] = [];
    try {
      for (let i = 0; i < r.events.length; i++) {
        const input = r.events[i]!;
        const d = input.data?.kind;
        sizes.push(d?.$case === 'json' ? Buffer.byteLength(d.value) : 0);
        candidates.push(eventInputToCandidate(input, i, parsedData));
      }
      const res = await app.append(caller, id, candidates, {
        expectedLastSeq: r.expectedLastSeq, idempotencyKey: r.idempotencyKey, parsedData,
        // UTF-8 bytes in both forms (typed data as the JSON it becomes), as the limit says.
        dataBytes: sizes.map((s, i) => s || Buffer.byteLength(JSON.stringify(candidates[i]?.data ?? null))),
        ...(order ? { onPlanned: order.onPlanned, retryAfter: order.retryAfter } : {}),
      });
      if (timed) metrics.appended(r.events.length, Number(process.hrtime.bigint() - started) / 1e9);
      return res;
    } catch (e) {
      if (e instanceof DomainError) metrics?.rejected(e.reason);
      throw e;
    }
  }

  const handlers: HandlerTable = {
    createSession: unary<CreateSessionRequest, CreateSessionResponse>('append', async (ctx, r) => ({
      session: toSession(await app.createSession(ctx.caller, {
        id: r.sessionId, labels: r.labels, cwd: r.cwd, origin: r.origin, delegationDepth: r.delegationDepth, agentPreset: r.agentPreset, strict: r.strict, pairingGuard: r.pairingGuard,
      })),
    })),
    getSession: unary<GetSessionRequest, GetSessionResponse>('read', async (ctx, r) => ({ session: await withSessionTokens(app, ctx.caller, r.sessionId, toSession(await app.getSession(ctx.caller, requireId(r.sessionId)))) })),
    listSessions: unary<ListSessionsRequest, ListSessionsResponse>('read', async (ctx, r) => {
      const page = await app.listSessions(ctx.caller, { pageSize: r.pageSize, pageToken: r.pageToken, labels: r.labelSelector });
      return { sessions: page.sessions.map(toSession), nextPageToken: page.nextPageToken };
    }),
    deleteSession: unary<DeleteSessionRequest, DeleteSessionResponse>('admin', async (ctx, r) => {
      await app.deleteSession(ctx.caller, requireId(r.sessionId));
      return {};
    }),
    appendEvents: unary<AppendEventsRequest, AppendEventsResponse>('append', async (ctx, r) => {
      const res = await appendBatch(ctx.caller, r);
      // Encoded here (a few bytes, without the generated writer); see grpc/pass-through.ts.
      return (encodeAppendEventsResponse(res.seqs, res.replayed, res.surfaceLength) as unknown as AppendEventsResponse | undefined)
        ?? { seqs: [...res.seqs], replayed: res.replayed, surfaceLength: res.surfaceLength };
    }),
    appendStream: appendStreamHandler(appendBatch, opts.onUnexpected ?? (() => undefined), opts.revocable),
    listEvents: unary<ListEventsRequest, ListEventsResponse>('read', async (ctx, r) => {
      let direction: 'forward' | 'backward' = r.direction === Direction.DIRECTION_BACKWARD ? 'backward' : 'forward';
      let fromSeq = r.fromSeq;
      if (r.pageToken) {
        const t = decodePageToken(r.pageToken);
        fromSeq = t.seq;
        direction = t.direction;
      }
      // References (blob_refs, issue #39) only in the json form: typed forms hold the values.
      const format = r.dataFormat === DataFormat.DATA_FORMAT_TYPED && !r.blobRefs ? 'typed' : 'json';
      // The json form straight from a store that encodes pages itself (the SQLite store with its
      // extension), cut at the same byte budget as below; else from the texts.
      const page = await app.listEvents(ctx.caller, requireId(r.sessionId), { fromSeq, direction, pageSize: r.pageSize, types: r.types, encodedBudgetBytes: format === 'json' ? pageBudget : undefined, encodedFormat: EVENT_PAGE_FORMAT, blobRefs: r.blobRefs });
      if (page.encoded !== undefined) {
        const token = page.nextSeq === undefined ? '' : encodePageToken(page.nextSeq, direction);
        return listEventsResponseOf(page.encoded.bytes, token) as unknown as ListEventsResponse;
      }
      // A page of large events could exceed the max message size, which the client could only
      // meet with RESOURCE_EXHAUSTED and no hint. Cut the page at a byte budget instead (always
      // at least one event) and continue from the first event left out.
      // Events may carry their stored data text (StoredEventText, from store.readEventTexts):
      // then that text goes to the wire without a JSON.parse/JSON.stringify round trip.
      // The json form (the default) is encoded here, straight from the texts (wire/event-encode.ts);
      // the typed form goes through the generated encoder.
      const typed = format === 'typed';
      const events: PbSessionEvent[] = [];
      const texts: EventWithText[] = [];
      let slow: Map<number, Uint8Array> | undefined;
      let nextSeq = page.nextSeq;
      let used = 0;
      for (const e of page.events as readonly (SessionEvent | StoredEventText)[]) {
        const stored = 'dataText' in e;
        const text = stored ? e.dataText : JSON.stringify(e.data);
        const textBytes = stored && e.dataBytes !== undefined ? e.dataBytes : Buffer.byteLength(text);
        const size = pageEventBytes(textBytes, Buffer.byteLength(e.type), e.sourceEventSeqs?.length ?? 0);
        if ((typed ? events.length : texts.length) > 0 && used + size > pageBudget) {
          nextSeq = e.seq;
          break;
        }
        used += size;
        if (typed) events.push(stored ? storedEventToProto(e, format) : eventToProto(e, format, text));
        else {
          if (!fastEncodable(e)) (slow ??= new Map()).set(texts.length, PbSessionEventCodec.encode(eventToProto(e as SessionEvent, 'json', text)).finish());
          texts.push({ event: e, text, textBytes });
        }
      }
      const nextPageToken = nextSeq === undefined ? '' : encodePageToken(nextSeq, direction);
      if (!typed) return encodeListEventsResponse(texts, nextPageToken, slow) as unknown as ListEventsResponse;
      return { events, nextPageToken };
    }),
    getSurface: unary<GetSurfaceRequest, GetSurfaceResponse>('read', async (ctx, r) => app.getSurface(ctx.caller, requireId(r.sessionId), r.asOfSeq)),
    getMessages: unary<GetMessagesRequest, GetMessagesResponse>('read', async (ctx, r) => {
      if (r.view === MessageView.MESSAGE_VIEW_UNSPECIFIED) {
        throw new DomainError('VIEW_UNSPECIFIED', 'view is required: MESSAGE_VIEW_MODEL_HISTORY or MESSAGE_VIEW_TRANSCRIPT', { field: 'view' });
      }
      const format = providerFormatOf(r.format);
      if (format !== undefined) return renderedMessages(app, ctx.caller, requireId(r.sessionId), r, format);
      const transcript = r.view === MessageView.MESSAGE_VIEW_TRANSCRIPT;
      const { messages, headSeq, nextPageToken: next } = await app.getMessagesPage(ctx.caller, requireId(r.sessionId), transcript ? 'transcript' : 'model', r.pageSize, r.pageToken, r.asOfSeq, r.blobRefs);
      // Model history: the projection's message objects persist across calls, so their encoded
      // entries are cached (see modelHistoryResponse); transcript messages are built per call
      // from a store read.
      if (!transcript && !r.typed && !r.blobRefs) return modelHistoryResponse(messages, headSeq, next, r.asOfSeq === undefined) as unknown as GetMessagesResponse;
      return {
        messages: messages.map((m) => ({
          seq: m.seq,
          messageJson: transcript || r.blobRefs ? JSON.stringify(m.message) : messageJsonText(m.message),
          // A message holding a blob reference has no typed form (issue #39).
          message: r.typed && !(r.blobRefs && findBlobRefs(m.message).length > 0) ? messageFromJson(m.message) : undefined,
          tokens: estimateMessageTokens(m.message),
        })),
        headSeq,
        nextPageToken: next,
        rendered: [],
      };
    }),
    forkSession: unary<ForkSessionRequest, ForkSessionResponse>('append', async (ctx, r) => ({
      session: toSession(await app.fork(ctx.caller, requireId(r.sessionId), { atSeq: r.atSeq, childId: r.childSessionId, labels: r.labels })),
    })),
    repairSession: unary<RepairSessionRequest, RepairSessionResponse>('append', async (ctx, r) => ({
      events: (await app.repair(ctx.caller, requireId(r.sessionId))).map((e) => eventToProto(e)),
    })),
    importSession: clientStream<ImportSessionRequest, ImportSessionResponse>('append', async (ctx, requests) => {
      const iter = requests[Symbol.asyncIterator]();
      const first = await iter.next();
      if (first.done || first.value.part?.$case !== 'options') {
        throw new DomainError('INVALID_ARGUMENT', 'the first ImportSessionRequest must carry options', { field: 'options' });
      }
      const o = first.value.part.value;
      async function* bytes(): AsyncGenerator<Uint8Array> {
        for (;;) {
          const n = await iter.next();
          if (n.done) return;
          if (n.value.part?.$case !== 'chunk') throw new DomainError('INVALID_ARGUMENT', 'options may only be sent once, first', { field: 'options' });
          yield n.value.part.value;
        }
      }
      const view = await app.importJsonl(ctx.caller, bytes(), { id: o.sessionId, labels: o.labels, strict: o.strict, allowSeqGaps: o.allowSeqGaps,
        // proto3 bool: unset reads false; only an explicit true overrides the file's own metadata line.
        pairingGuard: o.pairingGuard || undefined });
      return { session: toSession(view), uncommittedTailBytes: view.uncommittedTailBytes };
    }),
    exportSession: serverStream<ExportSessionRequest, ExportSessionResponse>('read', (ctx, req, sink) => {
      pipeStream(ctx, sink, async function* (stream) {
        // A token file reload that revokes this call's token ends the export (revocable-calls.ts).
        const untrack = opts.revocable?.add({
          credential: ctx.credential, tenant: ctx.caller.tenant, permission: 'read',
          revoke: (err) => stream.end(err),
        });
        if (untrack) stream.onEnd(untrack);
        const id = requireId(req.sessionId);
        // Lines are sent in chunks of about 256 KiB (one message each), cut per line, not per
        // store batch: a batch of large events made one message of many megabytes (over a
        // client's default 4 MiB receive limit, or the server's send limit).
        let buf: string[] = [];
        let size = 0;
        for await (const lines of app.exportJsonl(ctx.caller, id, { unpacked: req.unpacked, blobRefs: req.blobRefs })) {
          for (const l of lines) {
            buf.push(l);
            size += l.length;
            if (size >= 256 * 1024) {
              yield { chunk: Buffer.from(buf.join('\n') + '\n') };
              buf = [];
              size = 0;
            }
          }
        }
        if (buf.length > 0) yield { chunk: Buffer.from(buf.join('\n') + '\n') };
      });
    }),
  };
  return { ...handlers, ...compactionHandlers(app, requireId), ...feedHandlers(app, requireId, metrics ?? NO_METRICS, { heartbeatMs: opts.heartbeatMs, revocable: opts.revocable }), ...providerHandlers(app, requireId), ...blobHandlers(app), ...searchHandlers(app), ...streams };
}
