/**
 * PalimpsestClient: the thin layer over the generated ts-proto client that the Python and Go
 * packages have too. Errors are thrown as PalimpsestError (details decoded); UNAVAILABLE is
 * retried by grpc-js from the channel's service config; every append carries an idempotency key
 * (the caller's or a generated one) so a retried append is answered from the stored result;
 * `subscribeSurface` is an async iterable that reconnects and resumes from its last cursor.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  credentials, Metadata, status, type CallOptions, type ChannelCredentials, type ChannelOptions,
  type ClientReadableStream, type Interceptor, type ServiceError,
} from '@grpc/grpc-js';
import type { EventInput, SessionEvent } from './gen/palimpsest/v1/event.js';
import type { Session } from './gen/palimpsest/v1/session.js';
import type { TokenUsage } from './gen/palimpsest/v1/content.js';
import {
  DataFormat, Direction, MessageFormat, MessageView, PruneToolResultsRequest_Marker, SessionChangeKind, SessionServiceClient, type CompactResponse, type ExportSessionResponse,
  type ImportSessionRequest, type ImportSessionResponse, type PlanCompactionRequest, type PlanCompactionResponse, type PruneToolResultsResponse,
  type SessionChange, type SubscribeSessionsRequest, type SubscribeSessionsResponse, type SubscribeSurfaceRequest, type SubscribeSurfaceResponse,
} from './gen/palimpsest/v1/service.js';
import { withDerivedIds, type ContentBlock, type Message } from './events.js';
import { PalimpsestError, toPalimpsestError } from './errors.js';
import { AppendWriter } from './append-stream.js';
import { blobChunks } from './blobs.js';
import { searchPageOf, searchRequest, type SearchHit, type SearchOptions, type SearchPage } from './search.js';
import { context, propagation, type TextMapSetter } from '@opentelemetry/api';

/** Writes propagation headers into gRPC metadata. */
const METADATA_SETTER: TextMapSetter<Metadata> = { set: (md, key, value) => md.set(key, value) };

/** The channel's service config: UNAVAILABLE retried with backoff, up to 5 attempts in ~3 s. */
export const SERVICE_CONFIG = {
  methodConfig: [{
    name: [{ service: 'palimpsest.v1.SessionService' }],
    retryPolicy: {
      maxAttempts: 5, initialBackoff: '0.1s', maxBackoff: '2s', backoffMultiplier: 2, retryableStatusCodes: ['UNAVAILABLE'],
    },
  }],
};

/** TLS files (PEM): the server's CA (omit for system roots), and for mutual TLS a cert and key. */
export interface TlsFiles {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}

/** Connection options. */
export interface ClientOptions {
  /** Bearer token (refused in plaintext to a non-loopback address). */
  readonly token?: string;
  /** `true` = TLS with system roots; files; or ready-made credentials. */
  readonly tls?: boolean | TlsFiles | ChannelCredentials;
  /** `false` turns off the UNAVAILABLE retry policy. */
  readonly retries?: boolean;
  /** Deadline of each unary call in ms (default 30 000). */
  readonly timeoutMs?: number;
  /** Extra grpc-js channel options. */
  readonly channelOptions?: ChannelOptions;
  /** grpc-js client interceptors (tracing, logging). */
  readonly interceptors?: Interceptor[];
}

/** One message of a surface subscription (see SubscribeSurfaceResponse). */
export type SurfaceDelta =
  | { op: 'snapshot'; cursor: number | undefined; seqs: number[] }
  | { op: 'append'; cursor: number | undefined; seq: number; event: SessionEvent | undefined; message: Message | undefined }
  | { op: 'replace'; cursor: number | undefined; seq: number; start: number; end: number; shadowed: number[]; event: SessionEvent | undefined; message: Message | undefined }
  | { op: 'checkpoint' | 'caught_up' | 'heartbeat'; cursor: number | undefined };

/** Options of {@link PalimpsestClient.subscribeSurface}. */
export interface SubscribeOptions {
  /** Resume after this cursor (default: from the start). */
  readonly after?: number;
  /** Start with the current surface instead of every delta. */
  readonly snapshot?: boolean;
  /** Attach each delta's derived message (parsed JSON). */
  readonly includeMessages?: boolean;
  /** Heartbeat interval in ms (0 = server default). */
  readonly heartbeatMs?: number;
  /** Wait for the session to be created instead of failing with NOT_FOUND (an observer started before its agent). */
  readonly waitForCreate?: boolean;
  /** Blobbed values as their references `{"$blob": "sha256:…", "bytes": N, "mediaType": …}` (read them with `getBlob`) instead of their bytes. */
  readonly blobRefs?: boolean;
  /** `false`: a dropped connection ends the iteration with UNAVAILABLE instead of resuming. */
  readonly reconnect?: boolean;
  /** Longest wait between reconnect attempts (default 5000 ms). */
  readonly maxBackoffMs?: number;
  /** Ends the iteration (no error) when aborted. */
  readonly signal?: AbortSignal;
}

/** ImportSession's options: `sessionId` '' = the file's own id; the tool-pairing guard is off unless `pairingGuard`. */
export interface ImportOptions {
  readonly sessionId?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly strict?: boolean;
  readonly allowSeqGaps?: boolean;
  readonly pairingGuard?: boolean;
}

/** One change of a session from {@link PalimpsestClient.subscribeSessions} (or a signal). */
export type SessionFeedItem =
  | {
      kind: 'created' | 'deleted' | 'labels_changed' | 'appended'; position: number; sessionId: string; headSeq: number | undefined;
      eventCount: number; surfaceLength: number; eventTypes: string[]; labels: Record<string, string>;
      previousLabels: Record<string, string>; createdAt: number; time: number;
    }
  | { kind: 'caught_up' | 'heartbeat'; position: number };

/** Options of {@link PalimpsestClient.subscribeSessions}. */
export interface SubscribeSessionsOptions {
  /** Resume after this feed position (default: from the beginning of the feed). */
  readonly after?: number;
  /** Only changes from now on (ignored once a position was received: a resume continues after it). */
  readonly fromNow?: boolean;
  /** Only sessions carrying every one of these labels. */
  readonly selector?: Readonly<Record<string, string>>;
  /** Heartbeat interval in ms (0 = server default). */
  readonly heartbeatMs?: number;
  /** `false`: a dropped connection ends the iteration with UNAVAILABLE instead of resuming. */
  readonly reconnect?: boolean;
  /** Longest wait between reconnect attempts (default 5000 ms). */
  readonly maxBackoffMs?: number;
  /** Ends the iteration (no error) when aborted. */
  readonly signal?: AbortSignal;
}

const FEED_KINDS: Record<number, 'created' | 'deleted' | 'labels_changed' | 'appended'> = {
  [SessionChangeKind.SESSION_CHANGE_KIND_CREATED]: 'created',
  [SessionChangeKind.SESSION_CHANGE_KIND_DELETED]: 'deleted',
  [SessionChangeKind.SESSION_CHANGE_KIND_LABELS_CHANGED]: 'labels_changed',
  [SessionChangeKind.SESSION_CHANGE_KIND_APPENDED]: 'appended',
};

function changeItem(c: SessionChange, position: number): SessionFeedItem {
  return {
    kind: FEED_KINDS[c.kind] ?? 'appended', position, sessionId: c.sessionId, headSeq: c.headSeq, eventCount: c.eventCount,
    surfaceLength: c.surfaceLength, eventTypes: c.eventTypes, labels: c.labels, previousLabels: c.previousLabels, createdAt: c.createdAt, time: c.time,
  };
}

/**
 * The items of one feed message: a batch (`changes`, asked for with `batch`) is handed out one
 * change at a time, each with its own position (a server before batching sends no per-change
 * position on a lone `change`: the message's is used).
 */
function feedItems(m: SubscribeSessionsResponse): SessionFeedItem[] {
  const k = m.kind;
  if (k?.$case === 'change') return [changeItem(k.value, k.value.position || m.position)];
  if (k?.$case === 'changes') return k.value.changes.map((c) => changeItem(c, c.position));
  return [{ kind: k?.$case === 'caughtUp' ? 'caught_up' : 'heartbeat', position: m.position }];
}

/**
 * PlanCompaction's budget, exactly one of: `retainTokens` (the reference's: keep the shortest
 * recent tail of at least N tokens), `keepTokens` (Palimpsest's: the longest tail of at most N),
 * `upToSeq` (shadow up to this surface seq).
 */
export type CompactionBudget =
  | { retainTokens: number; keepTokens?: undefined; upToSeq?: undefined }
  | { keepTokens: number; retainTokens?: undefined; upToSeq?: undefined }
  | { upToSeq: number; retainTokens?: undefined; keepTokens?: undefined };

/** PlanCompaction's optional fields. */
export interface PlanOptions {
  /** The client's own token count per surface seq (else the server's estimator). */
  readonly tokenCounts?: Readonly<Record<number, number>>;
  /** Leave the range's messages out of the plan. */
  readonly omitMessages?: boolean;
}

/** Options of {@link PalimpsestClient.compact}: a plan, or a budget to plan with. */
export type CompactOptions = ({ plan: PlanCompactionResponse; retainTokens?: undefined; keepTokens?: undefined; upToSeq?: undefined } | (CompactionBudget & PlanOptions & { plan?: undefined })) & {
  /** The summary: text, content blocks, or a function of the plan's messages (JSON) returning either. */
  readonly summary: string | readonly ContentBlock[] | ((messages: Message[]) => string | readonly ContentBlock[] | Promise<string | readonly ContentBlock[]>);
  readonly provider: string;
  readonly model: string;
  readonly usage?: TokenUsage;
  readonly maxTokens?: number;
  readonly idempotencyKey?: string;
  /** The command that asked for the compaction (`sourceCommandId` in its events). */
  readonly sourceCommandId?: string;
};

/** Options of {@link PalimpsestClient.pruneToolResults}: `seqs`, or a policy. */
export interface PruneOptions {
  readonly seqs?: readonly number[];
  /** Policy and threshold: text over this many code points (the reference's thresholdChars). */
  readonly minChars?: number;
  /** Policy: text over this many UTF-8 bytes. */
  readonly minBytes?: number;
  readonly keepRecent?: number;
  readonly excludeTools?: readonly string[];
  /** Characters kept at the start (default 4096) and end (default 1024) of the text. */
  readonly headChars?: number;
  readonly tailChars?: number;
  /** 'reference' (default: the reference's fixed marker) or 'with-count' (names the removed count; not the reference's). */
  readonly marker?: 'reference' | 'with-count';
  /** Skip a prune that removes fewer code points (not the reference's). */
  readonly minSavingChars?: number;
  readonly expectedLastSeq?: number;
  readonly idempotencyKey?: string;
}

function budgetOf(b: CompactionBudget): PlanCompactionRequest['budget'] {
  const given = [b.retainTokens, b.keepTokens, b.upToSeq].filter((x) => x !== undefined).length;
  if (given === 1 && b.retainTokens !== undefined) return { $case: 'retainTokens', value: b.retainTokens };
  if (given === 1 && b.keepTokens !== undefined) return { $case: 'keepTokens', value: b.keepTokens };
  if (given === 1 && b.upToSeq !== undefined) return { $case: 'upToSeq', value: b.upToSeq };
  throw new Error('planCompaction needs exactly one budget: retainTokens, keepTokens or upToSeq');
}

type Unary<Req, Res> = (req: Req, md: Metadata, opts: Partial<CallOptions>, cb: (err: ServiceError | null, res: Res) => void) => unknown;

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

function credentialsFor(tls: ClientOptions['tls']): ChannelCredentials {
  if (!tls) return credentials.createInsecure();
  if (tls === true) return credentials.createSsl();
  if ('ca' in tls || 'cert' in tls || 'key' in tls || Object.keys(tls).length === 0) {
    const f = tls as TlsFiles;
    const pem = (p: string | undefined) => (p === undefined ? null : readFileSync(p));
    return credentials.createSsl(pem(f.ca), pem(f.key), pem(f.cert));
  }
  return tls as ChannelCredentials;
}

function delta(res: SubscribeSurfaceResponse): SurfaceDelta {
  const cursor = res.cursor;
  const message = res.message?.messageJson ? JSON.parse(res.message.messageJson) as Message : undefined;
  switch (res.kind?.$case) {
    case 'snapshot': return { op: 'snapshot', cursor, seqs: res.kind.value.seqs };
    case 'append': return { op: 'append', cursor, seq: res.kind.value.seq, event: res.event, message };
    case 'replace': {
      const r = res.kind.value;
      return { op: 'replace', cursor, seq: r.seq, start: r.start, end: r.end, shadowed: r.shadowedSeqs, event: res.event, message };
    }
    case 'checkpoint': return { op: 'checkpoint', cursor };
    case 'caughtUp': return { op: 'caught_up', cursor };
    default: return { op: 'heartbeat', cursor };
  }
}

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void { clearTimeout(t); signal?.removeEventListener('abort', done); resolve(); }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** A connection to a Palimpsest server. */
/** A provider format of `messages({format})` and `importMessages` (docs/providers.md). */
export type ProviderFormatName = 'openai-chat' | 'openai-responses' | 'anthropic' | 'gemini';

const MESSAGE_FORMATS: Record<ProviderFormatName, MessageFormat> = {
  'openai-chat': MessageFormat.MESSAGE_FORMAT_OPENAI_CHAT,
  'openai-responses': MessageFormat.MESSAGE_FORMAT_OPENAI_RESPONSES,
  anthropic: MessageFormat.MESSAGE_FORMAT_ANTHROPIC,
  gemini: MessageFormat.MESSAGE_FORMAT_GEMINI,
};

function messageFormatOf(name: ProviderFormatName): MessageFormat {
  const f = MESSAGE_FORMATS[name];
  if (f === undefined) throw new TypeError(`unknown format ${JSON.stringify(name)}; use one of ${Object.keys(MESSAGE_FORMATS).join(', ')}`);
  return f;
}

export class PalimpsestClient {
  /** The generated client, for calls this layer does not wrap. */
  readonly raw: SessionServiceClient;
  private readonly token: string | undefined;
  private readonly timeoutMs: number;

  constructor(readonly address: string, opts: ClientOptions = {}) {
    const host = address.slice(0, Math.max(0, address.lastIndexOf(':'))) || address;
    if (opts.token && !opts.tls && !isLoopback(host)) {
      throw new Error(`refusing to send a bearer token to ${address} without TLS; pass tls: { ca } or use a loopback address`);
    }
    const retries = opts.retries ?? true;
    this.raw = new SessionServiceClient(address, credentialsFor(opts.tls), {
      'grpc.max_receive_message_length': -1,
      'grpc.enable_retries': retries ? 1 : 0,
      ...(retries ? { 'grpc.service_config': JSON.stringify(SERVICE_CONFIG) } : {}),
      ...opts.channelOptions,
      ...(opts.interceptors ? { interceptors: opts.interceptors } : {}),
    });
    this.token = opts.token;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /** Closes the channel. */
  close(): void {
    this.raw.close();
  }

  private metadata(): Metadata {
    const md = new Metadata();
    if (this.token) md.set('authorization', `Bearer ${this.token}`);
    // W3C trace context of the caller's active OpenTelemetry span (traceparent/tracestate), so
    // the server's spans join the agent's trace. Without a registered SDK the global propagator
    // is a no-op and nothing is added.
    propagation.inject(context.active(), md, METADATA_SETTER);
    return md;
  }

  private unary<Req, Res>(method: Unary<Req, Res>, req: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      method.call(this.raw, req, this.metadata(), { deadline: Date.now() + this.timeoutMs },
        (err, res) => (err ? reject(toPalimpsestError(err)) : resolve(res)));
    });
  }

  /**
   * Creates an empty session (no id = a generated UUID). `pairingGuard: false` turns off the
   * tool-pairing guard (default: on; an append that breaks a tool call/result pair is refused with
   * FAILED_PRECONDITION / TOOL_PAIRING_BROKEN, metadata `callId`, `callSeq`, `resultSeq`).
   */
  async createSession(sessionId = '', opts: { labels?: Record<string, string>; strict?: boolean; cwd?: string; pairingGuard?: boolean } = {}): Promise<Session> {
    const res = await this.unary(this.raw.createSession, {
      sessionId, labels: opts.labels ?? {}, strict: opts.strict ?? false, cwd: opts.cwd, origin: undefined, delegationDepth: undefined, agentPreset: undefined,
      pairingGuard: opts.pairingGuard,
    });
    return res.session!;
  }

  /** The session header, labels and counts. */
  async getSession(sessionId: string): Promise<Session> {
    return (await this.unary(this.raw.getSession, { sessionId })).session!;
  }

  /** Seq of the last event (-1 for an empty log): the `expectedLastSeq` of a guarded append. */
  async head(sessionId: string): Promise<number> {
    return (await this.getSession(sessionId)).headSeq ?? -1;
  }

  /** Deletes a session. */
  async deleteSession(sessionId: string): Promise<void> {
    await this.unary(this.raw.deleteSession, { sessionId });
  }

  /**
   * Appends `events` as one atomic batch; returns their seqs. `expectedLastSeq` guards against
   * concurrent writers (HEAD_MISMATCH). Without an `idempotencyKey` one is generated per call.
   * Message ids the builders left empty are derived from the key and the event's index
   * (`events.derivedId`): retry a failed append by rebuilding the same batch with the same key,
   * and the server answers with the stored seqs.
   */
  async append(sessionId: string, events: readonly EventInput[], opts: { expectedLastSeq?: number; idempotencyKey?: string } = {}): Promise<number[]> {
    const idempotencyKey = opts.idempotencyKey || `ts-${randomUUID()}`;
    const res = await this.unary(this.raw.appendEvents, {
      sessionId, events: withDerivedIds(idempotencyKey, events), expectedLastSeq: opts.expectedLastSeq, idempotencyKey,
    });
    return res.seqs;
  }

  /**
   * A writer on one AppendStream: `append(sessionId, events, opts)` pipelines batches over the
   * stream (no per-call cost), each resolving with its seqs or rejecting with the PalimpsestError
   * the unary `append` would throw; `close()` half-closes and waits for outstanding answers. A
   * broken stream rejects every outstanding batch.
   */
  appendStream(): AppendWriter {
    return new AppendWriter(this.raw.appendStream(this.metadata()));
  }

  /**
   * The surface: ordered seqs of the model-visible events; with `asOfSeq`, the surface right after
   * that event (time travel; OUT_OF_RANGE / AS_OF_SEQ_AFTER_HEAD past the head).
   */
  async getSurface(sessionId: string, opts: { asOfSeq?: number } = {}): Promise<number[]> {
    return (await this.unary(this.raw.getSurface, { sessionId, asOfSeq: opts.asOfSeq })).seqs;
  }

  /**
   * The model history (or with `transcript`, what a human reads), each message as its JSON;
   * `asOfSeq`: as it was right after that event. With `format`, the model history as that
   * provider's request messages (see {@link renderedMessages} for the seqs and tokens of each).
   * `blobRefs`: blobbed values as their references (read them with `getBlob`) instead of their bytes.
   */
  async messages(sessionId: string, opts?: { transcript?: boolean; asOfSeq?: number; blobRefs?: boolean }): Promise<Message[]>;
  async messages(sessionId: string, opts: { asOfSeq?: number; format: ProviderFormatName; dropUnpaired?: boolean; blobRefs?: boolean }): Promise<unknown[]>;
  async messages(sessionId: string, opts: { transcript?: boolean; asOfSeq?: number; format?: ProviderFormatName; dropUnpaired?: boolean; blobRefs?: boolean } = {}): Promise<Message[] | unknown[]> {
    if (opts.format !== undefined) return (await this.renderedMessages(sessionId, opts.format, opts)).map((m) => m.message);
    const view = opts.transcript ? MessageView.MESSAGE_VIEW_TRANSCRIPT : MessageView.MESSAGE_VIEW_MODEL_HISTORY;
    const res = await this.unary(this.raw.getMessages, { sessionId, view, typed: false, pageSize: 0, pageToken: '', asOfSeq: opts.asOfSeq, format: 0, dropUnpaired: false, blobRefs: opts.blobRefs ?? false });
    return res.messages.map((m) => JSON.parse(m.messageJson) as Message);
  }

  /**
   * The model history rendered as a provider's request messages (`messages({format})`), each with
   * the seqs it was rendered from and its estimated `tokens` (the server's estimator over what the
   * message carries; docs/providers.md "Token counts"). FAILED_PRECONDITION /
   * HISTORY_NOT_RENDERABLE when the provider would refuse the history, unless `dropUnpaired`.
   */
  async renderedMessages(sessionId: string, format: ProviderFormatName, opts: { asOfSeq?: number; dropUnpaired?: boolean; blobRefs?: boolean } = {}): Promise<{ seqs: number[]; tokens: number; message: unknown }[]> {
    const res = await this.unary(this.raw.getMessages, {
      sessionId, view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, typed: false, pageSize: 0, pageToken: '', asOfSeq: opts.asOfSeq, format: messageFormatOf(format), dropUnpaired: opts.dropUnpaired ?? false, blobRefs: opts.blobRefs ?? false,
    });
    return res.rendered.map((m) => ({ seqs: m.seqs, tokens: m.tokens, message: JSON.parse(m.providerJson) as unknown }));
  }

  /**
   * Appends a conversation given in a provider's format (its messages / input items / contents) to
   * an existing session as the events the reference writes, and returns their seqs.
   */
  async importMessages(sessionId: string, format: ProviderFormatName, messages: readonly unknown[], opts: { provider?: string; model?: string } = {}): Promise<number[]> {
    const res = await this.unary(this.raw.importMessages, { sessionId, format: messageFormatOf(format), messagesJson: JSON.stringify(messages), provider: opts.provider ?? '', model: opts.model ?? '' });
    return res.seqs;
  }

  /**
   * Plans a compaction (read-only): keep the most recent `keepTokens` of the surface, or shadow up
   * to surface seq `upToSeq` (exactly one). The plan holds `start`, `end`, `shadowedSeqs`,
   * `expectedLastSeq` (the head it was made against), the derived `messages` of the range (what to
   * summarise) and `blockers` (empty = ready); `start` is undefined when there is nothing to compact.
   */
  async planCompaction(sessionId: string, opts: CompactionBudget & PlanOptions): Promise<PlanCompactionResponse> {
    return this.unary(this.raw.planCompaction, {
      sessionId, budget: budgetOf(opts), tokenCounts: { ...opts.tokenCounts }, omitMessages: opts.omitMessages ?? false,
    });
  }

  /**
   * Compacts the oldest part of the surface into `summary`; returns the CompactResponse (`seqs` of
   * compaction/start, compaction/summary, the replacing user/message and compaction/end) or
   * undefined when the plan has nothing to compact. Without `plan` it plans first (`retainTokens`,
   * `keepTokens` or `upToSeq`). When the summary is not smaller than the range the server refuses it
   * as the reference does: `error` is set and only compaction/start and compaction/end were written. The Compact is conditional on the planned head: if another writer moved the
   * session it fails with FAILED_PRECONDITION / HEAD_MISMATCH and nothing is written (plan
   * again). `summary`: text, content blocks, or a function of the plan's messages returning either.
   * Without an `idempotencyKey` one is generated, so a retry cannot compact twice.
   */
  async compact(sessionId: string, opts: CompactOptions): Promise<CompactResponse | undefined> {
    const { plan: given, summary: s } = opts;
    if (given && (opts.retainTokens !== undefined || opts.keepTokens !== undefined || opts.upToSeq !== undefined)) {
      throw new Error('compact takes either plan or a budget (retainTokens/keepTokens/upToSeq), not both');
    }
    const plan = given ?? await this.planCompaction(sessionId, opts as CompactionBudget & PlanOptions);
    if (plan.start === undefined || plan.end === undefined) return undefined;
    const summary = typeof s === 'function' ? await s(plan.messages.map((m) => JSON.parse(m.messageJson) as Message)) : s;
    return this.unary(this.raw.compact, {
      sessionId, start: plan.start, end: plan.end, expectedLastSeq: plan.expectedLastSeq,
      summary: typeof summary === 'string' ? { $case: 'summaryText', value: summary } : { $case: 'summaryJson', value: JSON.stringify(summary) },
      provider: opts.provider, model: opts.model, usage: opts.usage, maxTokens: opts.maxTokens, shadowedTokenCount: undefined,
      idempotencyKey: opts.idempotencyKey || `ts-${randomUUID()}`, rawOutputJson: '', llmStreamCall: false,
      sourceCommandId: opts.sourceCommandId ?? '',
    });
  }

  /**
   * Shortens tool results on the surface in place (a compaction/prune, then a tool/result copy
   * whose inner text keeps its first `headChars` and last `tailChars`): the given `seqs`, or by
   * policy (`minBytes`, `keepRecent`, `excludeTools`). A seq that is not a tool result on the
   * surface is refused with PRUNE_TARGET_INVALID (metadata `seq`); `expectedLastSeq` makes it
   * conditional (HEAD_MISMATCH).
   */
  async pruneToolResults(sessionId: string, opts: PruneOptions): Promise<PruneToolResultsResponse> {
    if (!opts.seqs?.length && !opts.minBytes && !opts.minChars) throw new Error('pruneToolResults needs seqs or a policy (minChars or minBytes)');
    return this.unary(this.raw.pruneToolResults, {
      sessionId, seqs: [...(opts.seqs ?? [])], minBytes: opts.minBytes ?? 0, keepRecent: opts.keepRecent ?? 0,
      excludeTools: [...(opts.excludeTools ?? [])], headChars: opts.headChars, tailChars: opts.tailChars,
      expectedLastSeq: opts.expectedLastSeq, idempotencyKey: opts.idempotencyKey || `ts-${randomUUID()}`,
      minChars: opts.minChars ?? 0, minSavingChars: opts.minSavingChars,
      marker: opts.marker === 'with-count' ? PruneToolResultsRequest_Marker.MARKER_WITH_COUNT : PruneToolResultsRequest_Marker.MARKER_UNSPECIFIED,
    });
  }

  /** Every session matching `labels` (all must match), newest first, paging through ListSessions. */
  async *listSessions(opts: { labels?: Readonly<Record<string, string>>; pageSize?: number } = {}): AsyncGenerator<Session> {
    let pageToken = '';
    for (;;) {
      const res = await this.unary(this.raw.listSessions, { pageSize: opts.pageSize ?? 0, pageToken, labelSelector: { ...opts.labels } });
      yield* res.sessions;
      if (!res.nextPageToken) return;
      pageToken = res.nextPageToken;
    }
  }

  /** Forks the session at a boundary seq (default: its last event) into a child session; returns the child. */
  async fork(sessionId: string, opts: { atSeq?: number; childSessionId?: string; labels?: Readonly<Record<string, string>> } = {}): Promise<Session> {
    const res = await this.unary(this.raw.forkSession, { sessionId, atSeq: opts.atSeq, childSessionId: opts.childSessionId ?? '', labels: { ...opts.labels } });
    return res.session!;
  }

  /** Appends the closers of an interrupted turn (nothing for a balanced log) and returns them. */
  async repair(sessionId: string): Promise<SessionEvent[]> {
    return (await this.unary(this.raw.repairSession, { sessionId })).events;
  }

  /**
   * The session as reference JSONL, in the chunks the server streams (write them to a file in
   * order: `pipeline(Readable.from(c.exportSession(id)), createWriteStream(path))`). `blobRefs`:
   * a file with blob references instead of bytes, which importSession into a tenant holding the
   * blobs turns back into the same session.
   */
  async *exportSession(sessionId: string, opts: { blobRefs?: boolean } = {}): AsyncGenerator<Uint8Array> {
    const call = this.raw.exportSession({ sessionId, unpacked: false, blobRefs: opts.blobRefs ?? false }, this.metadata());
    call.on('error', () => {}); // errors reach the iterator below
    try {
      for await (const res of call as AsyncIterable<ExportSessionResponse>) yield res.chunk;
    } catch (e) {
      throw toPalimpsestError(e);
    } finally {
      call.cancel();
    }
  }

  /**
   * Imports reference JSONL (`source`: bytes, text, or chunks such as `createReadStream(path)`)
   * as a new session, streamed; atomic: a refused file leaves no session. Returns the session and
   * the bytes of an uncommitted final line (one without its newline) that were left out.
   */
  importSession(source: Uint8Array | string | Iterable<Uint8Array | string> | AsyncIterable<Uint8Array | string>, opts: ImportOptions = {}): Promise<ImportSessionResponse> {
    return new Promise((resolve, reject) => {
      const call = this.raw.importSession(this.metadata(), (err, res) => (err ? reject(toPalimpsestError(err)) : resolve(res!)));
      const send = (req: ImportSessionRequest): Promise<void> => new Promise((ok) => { if (call.write(req)) ok(); else call.once('drain', ok); });
      void (async () => {
        await send({ part: { $case: 'options', value: {
          sessionId: opts.sessionId ?? '', labels: { ...opts.labels }, strict: opts.strict ?? false,
          allowSeqGaps: opts.allowSeqGaps ?? false, pairingGuard: opts.pairingGuard ?? false,
        } } });
        const chunks = typeof source === 'string' || source instanceof Uint8Array ? [source] : source;
        for await (const c of chunks) {
          await send({ part: { $case: 'chunk', value: typeof c === 'string' ? Buffer.from(c) : Buffer.from(c.buffer, c.byteOffset, c.byteLength) } });
        }
        call.end();
      })().catch((e: unknown) => { call.cancel(); reject(e); });
    });
  }

  /**
   * Every event of the caller's sessions matching `query` (docs/search.md), newest first or with
   * `order: 'score'` best first, paging through SearchEvents: the next page is asked for only
   * when the caller reads past the current one (stop early with `break`). A malformed query is
   * INVALID_ARGUMENT / SEARCH_QUERY_INVALID with `metadata.position`, its 0-based offset.
   */
  async *search(query: string, opts: SearchOptions = {}): AsyncGenerator<SearchHit> {
    let pageToken = '';
    for (;;) {
      const page = await this.searchPage(query, opts, pageToken);
      yield* page.hits;
      if (!page.nextPageToken) return;
      pageToken = page.nextPageToken;
    }
  }

  /** One page of {@link search}: its hits and the `nextPageToken` to pass back ('' on the last page). */
  async searchPage(query: string, opts: SearchOptions = {}, pageToken = ''): Promise<SearchPage> {
    return searchPageOf(await this.unary(this.raw.searchEvents, searchRequest(query, opts, pageToken)));
  }

  /**
   * Every event after `after` (default: from the start), paging through ListEvents. `blobRefs`:
   * blobbed values (images, large strings; docs/blobs.md) come as their references
   * `{"$blob": "sha256:…", "bytes": N, "mediaType": …}` (read them with `getBlob`) instead of
   * their bytes.
   */
  async *events(sessionId: string, opts: { after?: number; types?: readonly string[]; blobRefs?: boolean } = {}): AsyncGenerator<SessionEvent> {
    let pageToken = '';
    for (;;) {
      const res = await this.unary(this.raw.listEvents, {
        sessionId, fromSeq: pageToken ? undefined : opts.after === undefined ? undefined : opts.after + 1,
        direction: Direction.DIRECTION_FORWARD, pageSize: 0, pageToken, types: [...(opts.types ?? [])], dataFormat: DataFormat.DATA_FORMAT_JSON, blobRefs: opts.blobRefs ?? false,
      });
      yield* res.events;
      if (!res.nextPageToken) return;
      pageToken = res.nextPageToken;
    }
  }

  /**
   * The chunks of the tenant's blob `digest` from `offset` (GetBlob). A stream that breaks (the
   * connection drops, the server restarts) is opened again from the bytes already yielded.
   */
  blobChunks(digest: string, offset = 0): AsyncGenerator<Uint8Array> {
    return blobChunks(this.raw, () => this.metadata(), digest, offset);
  }

  /** The tenant's blob `digest` from `offset` (`blobChunks` joined: a read cut short resumes from the bytes it has). */
  async getBlob(digest: string, offset = 0): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    for await (const c of this.blobChunks(digest, offset)) parts.push(c);
    return Buffer.concat(parts);
  }

  /**
   * Sets and removes labels; with `expectedVersion` only while the session's metadata_version is
   * still that (ABORTED / METADATA_VERSION_MISMATCH otherwise). Returns the updated session.
   */
  async updateSession(sessionId: string, opts: { setLabels?: Record<string, string>; removeLabels?: readonly string[]; expectedVersion?: number }): Promise<Session> {
    return (await this.unary(this.raw.updateSession, {
      sessionId, setLabels: { ...(opts.setLabels ?? {}) }, removeLabels: [...(opts.removeLabels ?? [])], expectedVersion: opts.expectedVersion,
    })).session!;
  }

  /**
   * The session feed: one item per change of any session the caller may see (created, deleted,
   * labels_changed, appended), then `caught_up` and heartbeats, live until the caller stops
   * (the server may send several changes per message, SubscribeSessionsRequest.batch: they are
   * yielded one at a time, each with its own position)
   * iterating (or `signal` aborts). A dropped connection, a server restart or shutdown
   * (UNAVAILABLE) is followed by a reconnect with backoff that resumes after the last position
   * yielded, so every change is yielded exactly once.
   */
  async *subscribeSessions(opts: SubscribeSessionsOptions = {}): AsyncGenerator<SessionFeedItem> {
    let position = opts.after;
    let backoff = 50;
    const maxBackoff = opts.maxBackoffMs ?? 5000;
    while (!opts.signal?.aborted) {
      const req: SubscribeSessionsRequest = {
        after: position, fromNow: opts.fromNow === true && position === undefined, labelSelector: { ...(opts.selector ?? {}) },
        heartbeatIntervalMs: opts.heartbeatMs ?? 0, batch: true,
      };
      const call: ClientReadableStream<SubscribeSessionsResponse> = this.raw.subscribeSessions(req, this.metadata());
      call.on('error', () => {});
      const abort = (): void => call.cancel();
      opts.signal?.addEventListener('abort', abort, { once: true });
      try {
        for await (const res of call as AsyncIterable<SubscribeSessionsResponse>) {
          backoff = 50;
          // One change at a time, the position moving with each: a caller that stops (or a
          // reconnect) in the middle of a batch resumes right after the last change yielded.
          for (const it of feedItems(res)) {
            position = it.position;
            yield it;
          }
        }
        return;
      } catch (e) {
        const err = toPalimpsestError(e);
        if (opts.signal?.aborted) return;
        if (opts.reconnect === false || !(err instanceof PalimpsestError) || err.status !== status.UNAVAILABLE) throw err;
        await wait(backoff, opts.signal);
        backoff = Math.min(maxBackoff, backoff * 2);
      } finally {
        opts.signal?.removeEventListener('abort', abort);
        call.cancel();
      }
    }
  }

  /**
   * Surface deltas, live until the caller stops iterating (or `signal` aborts). A dropped
   * connection, a server restart or shutdown (UNAVAILABLE) is followed by a reconnect with
   * backoff that resumes after the last cursor yielded; other failures (NOT_FOUND when the
   * session is deleted) are thrown as PalimpsestError.
   */
  async *subscribeSurface(sessionId: string, opts: SubscribeOptions = {}): AsyncGenerator<SurfaceDelta> {
    let cursor = opts.after;
    let first = true;
    let backoff = 50;
    const maxBackoff = opts.maxBackoffMs ?? 5000;
    while (!opts.signal?.aborted) {
      const req: SubscribeSurfaceRequest = {
        sessionId, afterSeq: first && opts.snapshot ? undefined : cursor, snapshot: first && opts.snapshot === true,
        includeMessages: opts.includeMessages ?? false, heartbeatIntervalMs: opts.heartbeatMs ?? 0, dataFormat: DataFormat.DATA_FORMAT_JSON,
        waitForCreate: opts.waitForCreate ?? false, blobRefs: opts.blobRefs ?? false,
      };
      first = false;
      const call: ClientReadableStream<SubscribeSurfaceResponse> = this.raw.subscribeSurface(req, this.metadata());
      call.on('error', () => {}); // errors reach the iterator below; a cancel after it ends must not be unhandled
      const abort = (): void => call.cancel();
      opts.signal?.addEventListener('abort', abort, { once: true });
      try {
        for await (const res of call as AsyncIterable<SubscribeSurfaceResponse>) {
          backoff = 50;
          const d = delta(res);
          if (d.cursor !== undefined) cursor = d.cursor;
          yield d;
        }
        return;
      } catch (e) {
        const err = toPalimpsestError(e);
        if (opts.signal?.aborted) return;
        if (opts.reconnect === false || !(err instanceof PalimpsestError) || err.status !== status.UNAVAILABLE) throw err;
        await wait(backoff, opts.signal);
        backoff = Math.min(maxBackoff, backoff * 2);
      } finally {
        opts.signal?.removeEventListener('abort', abort);
        call.cancel();
      }
    }
  }
}
