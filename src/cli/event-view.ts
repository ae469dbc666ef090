/**
 * Events for people beyond the one-line row: a chunk shows its text (what was streamed), and
 * `--full` prints each event's whole data below its row, pretty-printed and wrapped to the width.
 */
import type { SessionEvent as PbSessionEvent } from '../../gen/palimpsest/v1/event.js';
import { protoToEvent } from '../server/convert.js';
import { eventRow } from './format.js';
import { truncate, type Style } from './output.js';

type Chunk = { type?: unknown; index?: unknown; text?: unknown; argumentsDelta?: unknown; name?: unknown; blockType?: unknown; reason?: unknown; block?: { type?: unknown } };

function dataOf(e: PbSessionEvent): unknown {
  return e.data?.kind?.$case === 'json' ? JSON.parse(e.data.kind.value) as unknown : protoToEvent(e).data;
}

/** What an assistant/chunk streamed, in words: `text-delta[0] "Let me"`. */
export function chunkText(e: PbSessionEvent): string | undefined {
  if (e.type !== 'assistant/chunk') return undefined;
  const c = ((dataOf(e) ?? {}) as { chunk?: Chunk }).chunk ?? {};
  const at = c.index === undefined ? '' : `[${String(c.index)}]`;
  switch (c.type) {
    case 'text-delta':
    case 'reasoning-delta':
      return `${c.type}${at} ${JSON.stringify(c.text)}`;
    case 'tool-call-delta':
      return `${c.type}${at} ${c.name === undefined ? '' : `${String(c.name)} `}${JSON.stringify(c.argumentsDelta)}`;
    case 'block-start':
      return `${c.type}${at} ${String(c.blockType)}`;
    case 'block-end':
      return `${c.type}${at} ${String(c.block?.type)}`;
    case 'finish':
      return `finish ${String(c.reason)}`;
    default:
      return undefined;
  }
}

/** Hard-wraps each line of `text` at `width` columns. */
export function wrap(text: string, width: number): string {
  const w = Math.max(20, width);
  return text.split('\n').flatMap((line) => {
    const out: string[] = [];
    for (let i = 0; i < line.length; i += w) out.push(line.slice(i, i + w));
    return out.length === 0 ? [''] : out;
  }).join('\n');
}

/** An event for people: its row (chunks showing their text), and with `full` its whole data. */
export function eventView(e: PbSessionEvent, style: Style, width: number, full: boolean): string {
  const chunk = chunkText(e);
  let row = eventRow(e, style, width);
  if (chunk !== undefined) {
    // Same fixed columns as eventRow; the data cell shows the streamed text instead of the JSON.
    const fixed = eventRow({ ...e, data: { kind: { $case: 'json', value: '' } } }, style, width);
    row = `${fixed}${truncate(chunk, Math.max(20, width - 77))}`;
  }
  if (!full) return row;
  const body = wrap(JSON.stringify(dataOf(e), null, 2), width - 4).replace(/^/gm, '    ');
  return `${row}\n${style.dim(body)}`;
}
