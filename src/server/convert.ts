/**
 * proto <-> domain conversions. The only place that knows both the generated types and the
 * domain envelope. Numbers: uint64 fields are `number` (ts-proto forceLong=number, which refuses
 * values above Number.MAX_SAFE_INTEGER at decode time).
 */
import type { CandidateEvent, Json, SessionEvent } from '../domain/event.js';
import { DomainError } from '../domain/errors.js';
import { jsonSyntaxProblem, type ParsedJsonText } from '../domain/json.js';
import type { SessionRecord, StoredEventText } from '../app/store-port.js';
import type { DataFormat } from '../../gen/palimpsest/v1/service.js';
import type { EventData, EventInput, SessionEvent as PbSessionEvent } from '../../gen/palimpsest/v1/event.js';
import type { Session as PbSession } from '../../gen/palimpsest/v1/session.js';
import { typedFromJson, typedToJson, TypedDataError } from './typed-data.js';
import { MAX_JSON_DEPTH, jsonTextDepth, jsonTextInfo } from '../domain/json-depth.js';

export { MAX_JSON_DEPTH, jsonTextDepth } from '../domain/json-depth.js';

/** The path of event `index`'s data field in an AppendEvents request (built only for an error). */
const requestDataField = (index: number): string => `events[${index}].data`;

/**
 * Parses the `json` data form; malformed or too deep text is a DomainError of the event, naming
 * `field` (undefined: the data of event `index` of a request, `events[index].data.json`). With
 * `parsed`, what adoptParsedJson needs to know about the text is pushed there (its canonical
 * form and member count): the caller then hands the fresh value to the domain.
 */
export function parseDataJson(text: string, index: number, field: string | undefined, parsed?: (ParsedJsonText | undefined)[]): Json {
  const info = parsed !== undefined ? jsonTextInfo(text) : undefined;
  if ((info === undefined ? jsonTextDepth(text) : info.depth) > MAX_JSON_DEPTH) {
    const f = field ?? `${requestDataField(index)}.json`;
    throw new DomainError('DATA_TOO_DEEP', `${f} nests deeper than ${MAX_JSON_DEPTH} levels`, { field: f, limit: String(MAX_JSON_DEPTH) }, index);
  }
  let value: Json;
  try {
    value = JSON.parse(text) as Json;
  } catch (e) {
    const f = field ?? `${requestDataField(index)}.json`;
    throw new DomainError('NOT_JSON', `${f} is not valid JSON text: ${jsonSyntaxProblem(e)}`, { field: f }, index);
  }
  if (info !== undefined) parsed!.push({ text: info.canonical ? text : undefined, members: info.members });
  return value;
}

/** The JSON value of EventData (the typed forms converted to the reference's JSON); `field` as parseDataJson's without `.json`. */
export function eventDataToJson(data: EventData | undefined, index: number, field: string | undefined, parsed?: (ParsedJsonText | undefined)[]): Json | undefined {
  const kind = data?.kind;
  if (!kind) {
    parsed?.push(undefined);
    return undefined;
  }
  if (kind.$case === 'json') return parseDataJson(kind.value, index, field === undefined ? undefined : `${field}.json`, parsed);
  parsed?.push(undefined);
  field ??= requestDataField(index);
  let value: Json | undefined;
  try {
    value = typedToJson(kind, field);
  } catch (e) {
    if (e instanceof TypedDataError) {
      throw e.tooDeep
        ? new DomainError('DATA_TOO_DEEP', e.message, { field: e.field, limit: String(MAX_JSON_DEPTH) }, index)
        : new DomainError('INVALID_ARGUMENT', e.message, { field: e.field }, index);
    }
    throw e;
  }
  // Embedded JSON texts are each within the limit; the assembled data must be too (as the json form).
  if (jsonTextDepth(JSON.stringify(value)) > MAX_JSON_DEPTH) {
    throw new DomainError('DATA_TOO_DEEP', `${field} nests deeper than ${MAX_JSON_DEPTH} levels`, { field, limit: String(MAX_JSON_DEPTH) }, index);
  }
  return value;
}

/**
 * An EventInput as the domain's candidate envelope (absent keys stay absent). With `parsed`, the
 * data of the json form is handed over to the domain (AppendOptions.parsedData, adoptParsedJson;
 * the request is not used afterwards): what is known about its text is pushed there, one entry
 * per event (undefined for the typed forms).
 */
export function eventInputToCandidate(input: EventInput, index: number, parsed?: (ParsedJsonText | undefined)[]): CandidateEvent {
  const data = eventDataToJson(input.data, index, undefined, parsed);
  const c: Record<string, unknown> = { type: input.type, data };
  if (data === undefined) delete c.data;
  if (input.seq !== undefined) c.seq = input.seq;
  if (input.time !== undefined) c.time = input.time;
  if (input.sourceEventSeqs) c.sourceEventSeqs = input.sourceEventSeqs.seqs.slice();
  const op = input.surfaceOp;
  if (op?.$case === 'append') c.surfaceOp = 'append';
  else if (op?.$case === 'replace') c.surfaceOp = { op: 'replace', start: op.value.start, end: op.value.end };
  if (input.ignorable) c.ignorable = true;
  return c as CandidateEvent;
}

/** A domain event as the proto message, with data as JSON text or typed when exact. */
export function eventToProto(e: SessionEvent, format: DataFormat | 'json' | 'typed' = 'json', dataText?: string): PbSessionEvent {
  let kind: EventData['kind'];
  if (format === 'typed' || format === 2) kind = typedFromJson(e.type, e.data);
  if (!kind) kind = { $case: 'json', value: dataText ?? JSON.stringify(e.data) };
  return withData(e, kind);
}

/**
 * A stored event with its data as JSON text (StoredEventText) as the proto message: the json
 * form puts the stored text on the wire as is; only the typed form parses it.
 */
export function storedEventToProto(e: StoredEventText, format: DataFormat | 'json' | 'typed' = 'json'): PbSessionEvent {
  let kind: EventData['kind'];
  if (format === 'typed' || format === 2) kind = typedFromJson(e.type, JSON.parse(e.dataText) as Json);
  return withData(e, kind ?? { $case: 'json', value: e.dataText });
}

function withData(e: Omit<SessionEvent, 'data'>, kind: NonNullable<EventData['kind']>): PbSessionEvent {
  const op = e.surfaceOp;
  return {
    seq: e.seq,
    time: e.time,
    type: e.type,
    data: { kind },
    sourceEventSeqs: e.sourceEventSeqs ? { seqs: e.sourceEventSeqs.slice() } : undefined,
    surfaceOp: op === undefined ? undefined : op === 'append'
      ? { $case: 'append', value: {} }
      : { $case: 'replace', value: { start: op.start, end: op.end } },
    ignorable: e.ignorable === true,
  };
}

/** A proto event back to the domain envelope (clients and tests; server reads use the store's). */
export function protoToEvent(e: PbSessionEvent): SessionEvent {
  const data = eventDataToJson(e.data, 0, 'data') ?? null;
  const out: { -readonly [K in keyof SessionEvent]: SessionEvent[K] } = { type: e.type, seq: e.seq, time: e.time, data };
  if (e.sourceEventSeqs) out.sourceEventSeqs = e.sourceEventSeqs.seqs.slice();
  if (e.surfaceOp?.$case === 'append') out.surfaceOp = 'append';
  else if (e.surfaceOp?.$case === 'replace') out.surfaceOp = { op: 'replace', start: e.surfaceOp.value.start, end: e.surfaceOp.value.end };
  if (e.ignorable) out.ignorable = true;
  return out;
}

/** A stored session as the proto Session. */
export function sessionToProto(r: SessionRecord, surfaceLength: number, live?: { headSeq: number | undefined; eventCount: number; damaged?: true }): PbSession {
  const h = r.header;
  return {
    id: h.id,
    version: h.version,
    createdAt: h.createdAt,
    cwd: h.cwd,
    parentSession: h.parentSession,
    seedLength: h.seedLength,
    origin: h.origin,
    delegationDepth: h.delegationDepth,
    agentPreset: h.agentPreset,
    labels: { ...r.labels },
    headSeq: live ? live.headSeq : r.eventCount > 0 ? r.nextSeq - 1 : undefined,
    eventCount: live ? live.eventCount : r.eventCount,
    surfaceLength,
    strict: r.strict,
    pairingGuard: r.pairingGuard,
    surfaceTokens: 0,
    usage: undefined,
    metadataVersion: r.metadataVersion,
    damaged: live?.damaged === true,
  };
}
