/**
 * `@palimpsest/client`: the TypeScript client of Palimpsest.
 *
 *     import { PalimpsestClient, events as ev } from '@palimpsest/client';
 *     const c = new PalimpsestClient('127.0.0.1:50051');
 *     await c.createSession('demo');
 *     await c.append('demo', [ev.userMessage('hi')]);
 *     for await (const d of c.subscribeSurface('demo')) console.log(d);
 */
export {
  PalimpsestClient, SERVICE_CONFIG, type ClientOptions, type CompactionBudget, type CompactOptions, type ImportOptions, type PlanOptions, type PruneOptions,
  type ProviderFormatName, type SessionFeedItem, type SubscribeOptions, type SubscribeSessionsOptions, type SurfaceDelta, type TlsFiles,
} from './client.js';
export { PalimpsestError, statusToPalimpsestError, toPalimpsestError, type Violation } from './errors.js';
export { AppendWriter, type AppendOptions } from './append-stream.js';
export { snippetParts, type SearchHit, type SearchOptions, type SearchPage, type SnippetPart, type SnippetRange } from './search.js';
export * as events from './events.js';
export type { EventInput, SessionEvent } from './gen/palimpsest/v1/event.js';
export type { Session } from './gen/palimpsest/v1/session.js';
export type {
  CompactResponse, ImportSessionResponse, PlanCompactionResponse, PruneToolResultsResponse,
} from './gen/palimpsest/v1/service.js';
export type { ContentBlock, Json, Message, MessageSource, StreamChunk, TokenUsage } from './events.js';
export { decodeError, decodeStatus, type DecodedError } from './error-details.js';
