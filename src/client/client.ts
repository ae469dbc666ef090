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
import type { EventInput, SessionEvent } from '../../gen/palimpsest/v1/event.js';
import type { Session } from '../../gen/palimpsest/v1/session.js';
import {
  DataFormat, Direction, MessageView, SessionServiceClient, type SubscribeSurfaceRequest, type SubscribeSurfaceResponse,
} from '../../gen/palimpsest/v1/service.js';
import { PalimpsestError, toPalimpsestError } from './errors.js';

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
  | { op: 'append'; cursor: number | undefined; seq: number; event: SessionEvent | undefined; message: unknown }
  | { op: 'replace'; cursor: number | undefined; seq: number; start: number; end: number; shadowed: number[]; event: SessionEvent | undefined; message: unknown }
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
  /** `false`: a dropped connection ends the iteration with UNAVAILABLE instead of resuming. */
  readonly reconnect?: boolean;
  /** Longest wait between reconnect attempts (default 5000 ms). */
  readonly maxBackoffMs?: number;
  /** Ends the iteration (no error) when aborted. */
  readonly signal?: AbortSignal;
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
  const message = res.message?.messageJson ? JSON.parse(res.message.messageJson) as unknown : undefined;
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
    return md;
  }

  private unary<Req, Res>(method: Unary<Req, Res>, req: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      method.call(this.raw, req, this.metadata(), { deadline: Date.now() + this.timeoutMs },
        (err, res) => (err ? reject(toPalimpsestError(err)) : resolve(res)));
    });
  }

  /** Creates an empty session (no id = a generated UUID). */
  async createSession(sessionId = '', opts: { labels?: Record<string, string>; strict?: boolean; cwd?: string } = {}): Promise<Session> {
    const res = await this.unary(this.raw.createSession, {
      sessionId, labels: opts.labels ?? {}, strict: opts.strict ?? false, cwd: opts.cwd, origin: undefined, delegationDepth: undefined, agentPreset: undefined,
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
   */
  async append(sessionId: string, events: readonly EventInput[], opts: { expectedLastSeq?: number; idempotencyKey?: string } = {}): Promise<number[]> {
    const res = await this.unary(this.raw.appendEvents, {
      sessionId, events: [...events], expectedLastSeq: opts.expectedLastSeq, idempotencyKey: opts.idempotencyKey || `ts-${randomUUID()}`,
    });
    return res.seqs;
  }

  /** The surface: ordered seqs of the model-visible events. */
  async getSurface(sessionId: string): Promise<number[]> {
    return (await this.unary(this.raw.getSurface, { sessionId })).seqs;
  }

  /** The model history (or with `transcript`, what a human reads), each message as its JSON. */
  async messages(sessionId: string, opts: { transcript?: boolean } = {}): Promise<unknown[]> {
    const view = opts.transcript ? MessageView.MESSAGE_VIEW_TRANSCRIPT : MessageView.MESSAGE_VIEW_MODEL_HISTORY;
    const res = await this.unary(this.raw.getMessages, { sessionId, view, typed: false, pageSize: 0, pageToken: '' });
    return res.messages.map((m) => JSON.parse(m.messageJson) as unknown);
  }

  /** Every event after `after` (default: from the start), paging through ListEvents. */
  async *events(sessionId: string, opts: { after?: number; types?: readonly string[] } = {}): AsyncGenerator<SessionEvent> {
    let pageToken = '';
    for (;;) {
      const res = await this.unary(this.raw.listEvents, {
        sessionId, fromSeq: pageToken ? undefined : opts.after === undefined ? undefined : opts.after + 1,
        direction: Direction.DIRECTION_FORWARD, pageSize: 0, pageToken, types: [...(opts.types ?? [])], dataFormat: DataFormat.DATA_FORMAT_JSON,
      });
      yield* res.events;
      if (!res.nextPageToken) return;
      pageToken = res.nextPageToken;
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
