/**
 * Helpers for the e2e suites: a promise API over the generated client that fills unset request
 * fields (fromPartial), streamed import/export, whole-log reads, and the reference replay used to
 * check that a served surface equals a fresh fold of the served log.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ServiceError } from '@grpc/grpc-js';
import {
  UpdateSessionRequest, type UpdateSessionResponse,
  AppendEventsRequest, CreateSessionRequest, DeleteSessionRequest, ExportSessionRequest, ForkSessionRequest,
  GetMessagesRequest, GetSessionRequest, GetSurfaceRequest, ImportOptions, ListEventsRequest, ListSessionsRequest,
  RepairSessionRequest, PlanCompactionRequest, CompactRequest, PruneToolResultsRequest, ImportMessagesRequest, type ImportMessagesResponse,
  type PlanCompactionResponse, type CompactResponse, type PruneToolResultsResponse, type AppendEventsResponse, type CreateSessionResponse, type DeleteSessionResponse,
  type ForkSessionResponse, type GetMessagesResponse, type GetSessionResponse, type GetSurfaceResponse,
  type ImportSessionResponse, type ListEventsResponse, type ListSessionsResponse, type RepairSessionResponse,
  type SessionServiceClient,
} from '../../gen/palimpsest/v1/service.js';
import type { SessionEvent as PbSessionEvent } from '../../gen/palimpsest/v1/event.js';
import { protoToEvent } from '../../src/server/convert.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import type { CandidateEvent, SessionEvent } from '../../src/domain/event.js';
import { decodeError, type DecodedError } from '../../src/client/error-details.js';

/** Reference session logs. */
export const FIXTURES = new URL('../fixtures/reference-sessions', import.meta.url).pathname;

/** Reads a fixture file. */
export function fixture(name: string): Buffer {
  return readFileSync(join(FIXTURES, name));
}

type Partialish<T> = T extends readonly (infer U)[] ? Partialish<U>[] : T extends { $case: string } ? T : T extends object ? { [K in keyof T]?: Partialish<T[K]> } : T;

interface Codec<T> {
  fromPartial(o: never): T;
}

const DEADLINE_MS = 20_000;

function unary<Req, Res>(client: SessionServiceClient, method: string, codec: Codec<Req>) {
  return (req: Partialish<Req>): Promise<Res> => new Promise((resolve, reject) => {
    const fn = (client as unknown as Record<string, (...a: unknown[]) => unknown>)[method]!;
    fn.call(client, codec.fromPartial(req as never), { deadline: Date.now() + DEADLINE_MS }, (err: ServiceError | null, res: Res) => (err ? reject(err) : resolve(res)));
  });
}

/** Promise API of a SessionServiceClient (every request field optional). */
export function api(client: SessionServiceClient) {
  return {
    client,
    createSession: unary<CreateSessionRequest, CreateSessionResponse>(client, 'createSession', CreateSessionRequest),
    getSession: unary<GetSessionRequest, GetSessionResponse>(client, 'getSession', GetSessionRequest),
    listSessions: unary<ListSessionsRequest, ListSessionsResponse>(client, 'listSessions', ListSessionsRequest),
    deleteSession: unary<DeleteSessionRequest, DeleteSessionResponse>(client, 'deleteSession', DeleteSessionRequest),
    appendEvents: unary<AppendEventsRequest, AppendEventsResponse>(client, 'appendEvents', AppendEventsRequest),
    listEvents: unary<ListEventsRequest, ListEventsResponse>(client, 'listEvents', ListEventsRequest),
    getSurface: unary<GetSurfaceRequest, GetSurfaceResponse>(client, 'getSurface', GetSurfaceRequest),
    getMessages: unary<GetMessagesRequest, GetMessagesResponse>(client, 'getMessages', GetMessagesRequest),
    importMessages: unary<ImportMessagesRequest, ImportMessagesResponse>(client, 'importMessages', ImportMessagesRequest),
    forkSession: unary<ForkSessionRequest, ForkSessionResponse>(client, 'forkSession', ForkSessionRequest),
    repairSession: unary<RepairSessionRequest, RepairSessionResponse>(client, 'repairSession', RepairSessionRequest),
    planCompaction: unary<PlanCompactionRequest, PlanCompactionResponse>(client, 'planCompaction', PlanCompactionRequest),
    compact: unary<CompactRequest, CompactResponse>(client, 'compact', CompactRequest),
    pruneToolResults: unary<PruneToolResultsRequest, PruneToolResultsResponse>(client, 'pruneToolResults', PruneToolResultsRequest),
    updateSession: unary<UpdateSessionRequest, UpdateSessionResponse>(client, 'updateSession', UpdateSessionRequest),

    /** Streams `data` in `chunkSize` pieces after the options. */
    importSession(opts: Partialish<ImportOptions>, data: Uint8Array, chunkSize = 7919): Promise<ImportSessionResponse> {
      return new Promise((resolve, reject) => {
        const stream = client.importSession({ deadline: Date.now() + DEADLINE_MS }, (err, res) => (err ? reject(err) : resolve(res)));
        stream.write({ part: { $case: 'options', value: ImportOptions.fromPartial(opts as never) } });
        for (let i = 0; i < data.length; i += chunkSize) stream.write({ part: { $case: 'chunk', value: Buffer.from(data.subarray(i, i + chunkSize)) } });
        stream.end();
      });
    },

    /** The exported file as text. */
    exportSession(sessionId: string, unpacked = false, blobRefs = false): Promise<string> {
      return new Promise((resolve, reject) => {
        const parts: Buffer[] = [];
        const stream = client.exportSession(ExportSessionRequest.fromPartial({ sessionId, unpacked, blobRefs }), { deadline: Date.now() + DEADLINE_MS });
        stream.on('data', (m: { chunk: Uint8Array }) => parts.push(Buffer.from(m.chunk)));
        stream.on('error', reject);
        stream.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
      });
    },
  };
}

/** The API type. */
export type Api = ReturnType<typeof api>;

/** Awaits a call that must fail; returns its decoded status. */
export async function failure(p: Promise<unknown>): Promise<DecodedError> {
  try {
    await p;
  } catch (e) {
    if (typeof (e as ServiceError).code !== 'number') throw e;
    return decodeError(e as ServiceError);
  }
  throw new Error('expected the call to fail');
}

/** Every event of a session, forward, by pages of `pageSize`. */
export async function allEvents(a: Api, sessionId: string, pageSize = 500): Promise<PbSessionEvent[]> {
  const out: PbSessionEvent[] = [];
  let pageToken = '';
  for (;;) {
    const page = await a.listEvents({ sessionId, pageSize, pageToken });
    out.push(...page.events);
    if (!page.nextPageToken) return out;
    pageToken = page.nextPageToken;
  }
}

/** Folds a served log through a fresh engine in import mode; returns its surface and counters. */
export function replay(events: readonly PbSessionEvent[], sessionId = 'replay'): { surface: number[]; replaceGeneration: number; engine: SessionEngine } {
  const domain: SessionEvent[] = events.map((e) => protoToEvent(e));
  const engine = SessionEngine.create();
  const bySeq = new Map(domain.map((e) => [e.seq, e] as const));
  if (domain.length > 0) {
    engine.commit(engine.plan(domain as unknown as CandidateEvent[], { mode: 'import', now: () => 0, sessionId, lookup: (s) => bySeq.get(s), allowSeqGaps: true }));
  }
  return { surface: engine.surface(), replaceGeneration: engine.replaceGeneration, engine };
}

/** Polls `fn` until it returns a truthy value or the deadline passes. */
export async function until<T>(fn: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
