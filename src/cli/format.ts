/**
 * Renderings of sessions, events and messages: the JSON forms `--json` prints (events in the
 * reference envelope, via the same converter and line encoder the server uses) and the human
 * forms.
 */
import type { SessionEvent as PbSessionEvent } from '../../gen/palimpsest/v1/event.js';
import type { Session } from '../../gen/palimpsest/v1/session.js';
import { encodeEventLine } from '../domain/jsonl-writer.js';
import { protoToEvent } from '../server/convert.js';
import type { Json } from '../domain/event.js';
import { truncate, type Style } from './output.js';

/** A proto event as one reference JSONL line (`type, seq, time, data, ...`). */
export function eventLine(e: PbSessionEvent): string {
  return encodeEventLine(protoToEvent(e));
}

/** A proto event as the reference envelope object (key order preserved). */
export function eventObject(e: PbSessionEvent): Json {
  return JSON.parse(eventLine(e)) as Json;
}

/** A session as a JSON object: every field, optional header fields only when present. */
export function sessionObject(s: Session): Record<string, unknown> {
  const out: Record<string, unknown> = { id: s.id, version: s.version, createdAt: s.createdAt };
  const optional = { cwd: s.cwd, parentSession: s.parentSession, seedLength: s.seedLength, origin: s.origin, delegationDepth: s.delegationDepth, agentPreset: s.agentPreset };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) out[k] = v;
  Object.assign(out, { labels: s.labels, eventCount: s.eventCount, surfaceLength: s.surfaceLength, strict: s.strict, pairingGuard: s.pairingGuard });
  if (s.headSeq !== undefined) out['headSeq'] = s.headSeq;
  // Token counts (GetSession only: a listed session has no usage).
  if (s.usage !== undefined) {
    out['surfaceTokens'] = s.surfaceTokens;
    out['usage'] = { inputTokens: s.usage.inputTokens, outputTokens: s.usage.outputTokens, cacheReadTokens: s.usage.cacheReadTokens ?? 0, cacheWriteTokens: s.usage.cacheWriteTokens ?? 0 };
  }
  return out;
}

function labelsText(labels: Record<string, string>): string {
  return Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(',');
}

/** Column headers of the session table. */
export const SESSION_COLUMNS = ['ID', 'CREATED', 'EVENTS', 'SURFACE', 'HEAD', 'LABELS'];

/** A session as a table row. */
export function sessionRow(s: Session, style: Style): string[] {
  return [style.cyan(s.id), new Date(s.createdAt).toISOString(), String(s.eventCount), String(s.surfaceLength), s.headSeq === undefined ? '-' : String(s.headSeq), labelsText(s.labels)];
}

/** A session as `key: value` lines. */
export function sessionDetails(s: Session, style: Style): string {
  const o = sessionObject(s);
  o['createdAt'] = `${s.createdAt} (${new Date(s.createdAt).toISOString()})`;
  o['labels'] = labelsText(s.labels) || '-';
  if (s.usage !== undefined) {
    o['usage'] = `input ${s.usage.inputTokens}, output ${s.usage.outputTokens}, cache read ${s.usage.cacheReadTokens ?? 0}, cache write ${s.usage.cacheWriteTokens ?? 0}`;
  }
  return Object.entries(o).map(([k, v]) => `${style.bold(k.padEnd(16))}${String(v)}`).join('\n') + '\n';
}

function opText(e: PbSessionEvent): string {
  const op = e.surfaceOp;
  if (op?.$case === 'append') return 'append';
  if (op?.$case === 'replace') return `replace ${op.value.start}..${op.value.end}`;
  return '';
}

/** Header of the fixed-width event listing (fixed widths so that it can stream). */
export function eventHeader(style: Style): string {
  return style.bold(`${'SEQ'.padStart(7)}  ${'TIME'.padEnd(24)}  ${'TYPE'.padEnd(22)}  ${'SURFACE'.padEnd(15)}  DATA`);
}

/** An event as one fixed-width line for people. */
export function eventRow(e: PbSessionEvent, style: Style, width = 120): string {
  const data = e.data?.kind?.$case === 'json' ? e.data.kind.value : JSON.stringify(protoToEvent(e).data);
  const op = opText(e);
  const paint = op === '' ? (x: string) => x : op === 'append' ? style.green : style.yellow;
  const opCell = paint(op) + ' '.repeat(Math.max(0, 15 - op.length));
  const fixed = `${String(e.seq).padStart(7)}  ${new Date(e.time).toISOString().padEnd(24)}  ${e.type.padEnd(22)}  `;
  return `${style.cyan(fixed.slice(0, 9))}${fixed.slice(9)}${opCell}  ${style.dim(truncate(data, Math.max(20, width - fixed.length - 17)))}`;
}
