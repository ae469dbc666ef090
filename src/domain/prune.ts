/**
 * Tool-result pruning, as the reference's tool-result pruner writes it (dsh-semantics 2.7): for
 * each pruned surface tool/result, a `compaction/prune {shadowedRange:{start:seq,end:seq},
 * shadowedSeqs:[seq], shadowedTokenCount}` and then a `tool/result` copy of the node's data,
 * identical except the tool-result block's inner content, with surfaceOp `{replace, seq, seq}` and
 * sourceEventSeqs `[seq]`. The copy keeps every key in its place (the message id too), so rule 2.4
 * (TOOL_RESULT_REPLACE_NON_CONTENT) accepts it; pruning a pruned result prunes the current copy.
 *
 * The content rewrite is the reference's: across the text blocks of the inner content (non-text
 * blocks kept as they are), keep the first `headChars` and the last `tailChars` code points and put
 * one marker where the middle was; a text block left empty is dropped. A result is pruned
 * whenever its text exceeds the threshold in code points (the reference's `thresholdChars`,
 * which must be at least head + marker + tail, so a pruned text is never longer). The marker is
 * the reference's fixed `\n\n[... tool result middle pruned ...]\n\n` by default. Palimpsest's
 * own choices are options that differ from the reference: a marker naming how many characters
 * were removed (`with-count`), and skipping a prune that removes fewer than `minSavingChars`.
 */
import type { Json, JsonObject, SessionEvent } from './event.js';
import { isJsonObject } from './json.js';
import { estimateMessageTokens } from './token-estimate.js';
import { messageOf } from './message-view.js';
import type { BuiltEvent } from './compaction-plan.js';
import { utf8Length } from './utf8.js';

/** Default code points kept at the start of a pruned text (the reference's headChars). */
export const DEFAULT_HEAD_CHARS = 4096;
/** Default code points kept at the end of a pruned text (the reference's tailChars). */
export const DEFAULT_TAIL_CHARS = 1024;

/** The reference's marker (tool-result-pruner config.ts PRUNE_MARKER), the default. */
export const PRUNE_MARKER = '\n\n[... tool result middle pruned ...]\n\n';

/** Which marker a prune writes: the reference's fixed one, or Palimpsest's naming the count. */
export type PruneMarkerKind = 'reference' | 'with-count';

/** How to prune one result's text. */
export interface PruneOptions {
  readonly headChars: number;
  readonly tailChars: number;
  /** Prune only a text of more code points than this; default head + marker + tail. */
  readonly thresholdChars?: number;
  /** Default 'reference'. */
  readonly marker?: PruneMarkerKind;
  /** Skip a prune that removes fewer code points than this (Palimpsest's option; default 0). */
  readonly minSavingChars?: number;
}

/** Code points of the reference marker (39). */
export const PRUNE_MARKER_CHARS = Array.from(PRUNE_MARKER).length;

/** The smallest threshold the reference accepts for these budgets: head + marker + tail. */
export function minThresholdChars(headChars: number, tailChars: number): number {
  return headChars + PRUNE_MARKER_CHARS + tailChars;
}

/** Palimpsest's marker (option `with-count`), put where `removed` characters were. */
export function pruneMarker(removed: number): string {
  return `\n\n[... tool result middle pruned: ${removed} characters ...]\n\n`;
}

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** UTF-8 bytes of the text blocks of a content array. */
export function textBytes(blocks: readonly Json[]): number {
  let n = 0;
  for (const b of blocks) if (isJsonObject(b) && b['type'] === 'text' && typeof b['text'] === 'string') n += utf8Length(b['text']);
  return n;
}

/** Code points of the text blocks of a content array (the reference's measureContent). */
export function textChars(blocks: readonly Json[]): number {
  let n = 0;
  for (const b of blocks) if (isJsonObject(b) && b['type'] === 'text' && typeof b['text'] === 'string') n += codePoints(b['text']);
  return n;
}

/**
 * The pruned content (the reference's pruneContent), or null when the text does not exceed the
 * threshold (or, with `minSavingChars`, would remove fewer code points).
 */
export function pruneContent(blocks: readonly Json[], opts: PruneOptions): { content: Json[]; removed: number } | null {
  const { headChars, tailChars } = opts;
  const texts: string[][] = [];
  let total = 0;
  for (const b of blocks) {
    if (isJsonObject(b) && b['type'] === 'text' && typeof b['text'] === 'string') {
      const pts = Array.from(b['text']);
      texts.push(pts);
      total += pts.length;
    } else texts.push([]);
  }
  const threshold = opts.thresholdChars ?? minThresholdChars(headChars, tailChars);
  if (total <= threshold) return null;
  const removed = total - headChars - tailChars;
  if (removed <= 0) return null;
  if (opts.minSavingChars !== undefined && removed < opts.minSavingChars) return null;
  const marker = opts.marker === 'with-count' ? pruneMarker(removed) : PRUNE_MARKER;
  const removedStart = headChars;
  const removedEnd = total - tailChars;
  const out: Json[] = [];
  let consumed = 0;
  let inserted = false;
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i] as Json;
    if (!(isJsonObject(b) && b['type'] === 'text' && typeof b['text'] === 'string')) {
      out.push(b);
      continue;
    }
    const pts = texts[i] as string[];
    const blockStart = consumed;
    const blockEnd = blockStart + pts.length;
    const headEnd = Math.min(pts.length, Math.max(0, removedStart - blockStart));
    const tailStart = Math.min(pts.length, Math.max(0, removedEnd - blockStart));
    const intersects = blockStart < removedEnd && blockEnd > removedStart;
    const m = intersects && !inserted ? marker : '';
    if (m.length > 0) inserted = true;
    const text = pts.slice(0, headEnd).join('') + m + pts.slice(tailStart).join('');
    if (text.length > 0) out.push({ ...b, text });
    consumed = blockEnd;
  }
  return inserted ? { content: out, removed } : null;
}

/** The tool-result inner content of a tool/result event (canonical or legacy shape), or undefined. */
export function toolResultContent(e: SessionEvent): readonly Json[] | undefined {
  const d = e.data;
  if (!isJsonObject(d)) return undefined;
  if (!('message' in d)) return Array.isArray(d['content']) ? (d['content'] as Json[]) : undefined;
  const m = d['message'];
  if (!isJsonObject(m) || !Array.isArray(m['content'])) return undefined;
  const block = m['content'][0];
  if (!isJsonObject(block) || !Array.isArray(block['content'])) return undefined;
  return block['content'] as Json[];
}

/** `data` with the tool-result inner content replaced, every key in its place. */
export function withToolResultContent(data: Json, content: Json[]): Json {
  const d = data as JsonObject;
  const out: JsonObject = {};
  if (!('message' in d)) {
    for (const k of Object.keys(d)) out[k] = k === 'content' ? content : (d[k] as Json);
    return out;
  }
  const m = d['message'] as JsonObject;
  const blocks = m['content'] as Json[];
  const block = blocks[0] as JsonObject;
  const newBlock: JsonObject = {};
  for (const k of Object.keys(block)) newBlock[k] = k === 'content' ? content : (block[k] as Json);
  const newMessage: JsonObject = {};
  for (const k of Object.keys(m)) newMessage[k] = k === 'content' ? [newBlock, ...blocks.slice(1)] : (m[k] as Json);
  for (const k of Object.keys(d)) out[k] = k === 'message' ? newMessage : (d[k] as Json);
  return out;
}

/** One pruned result in a batch. */
export interface PruneEntry {
  readonly originalSeq: number;
  /** Index of its compaction/prune in the batch (the copy is the next one). */
  readonly index: number;
  readonly callId: string;
  readonly bytesBefore: number;
  readonly bytesAfter: number;
}

/** The prune batch for `targets` (surface tool/result events, in surface order); skipped = too short. */
export function pruneBatch(targets: readonly SessionEvent[], sessionId: string, opts: PruneOptions): { events: BuiltEvent[]; entries: PruneEntry[]; skipped: number[] } {
  const events: BuiltEvent[] = [];
  const entries: PruneEntry[] = [];
  const skipped: number[] = [];
  for (const t of targets) {
    const content = toolResultContent(t);
    const pruned = content === undefined ? null : pruneContent(content, opts);
    if (content === undefined || pruned === null) {
      skipped.push(t.seq);
      continue;
    }
    const message = messageOf(t, sessionId);
    const callId = message !== undefined && isJsonObject(message['source']) && typeof message['source']['callId'] === 'string' ? message['source']['callId'] : '';
    entries.push({ originalSeq: t.seq, index: events.length, callId, bytesBefore: textBytes(content), bytesAfter: textBytes(pruned.content) });
    events.push({
      type: 'compaction/prune',
      data: { shadowedRange: { start: t.seq, end: t.seq }, shadowedSeqs: [t.seq], shadowedTokenCount: estimateMessageTokens(message) },
    });
    events.push({
      type: 'tool/result',
      data: withToolResultContent(t.data, pruned.content),
      surfaceOp: { op: 'replace', start: t.seq, end: t.seq },
      sourceEventSeqs: [t.seq],
    });
  }
  return { events, entries, skipped };
}
