/**
 * Messages for people: what a derived message is (a compaction summary, a pruned tool result, a
 * message compacted away), long tool output folded unless --full, and the one-line summary
 * `watch --messages` prints.
 */
import { truncate, type Style } from './output.js';

type Block = { type?: unknown; text?: unknown; name?: unknown; arguments?: unknown; content?: unknown; toolCallId?: unknown };
type Message = { id?: unknown; role?: unknown; content?: unknown; source?: { kind?: unknown; plugin?: unknown } };

/** What a message is, beyond its role. */
export type Mark = 'summary' | 'pruned' | 'compacted' | undefined;

/** Tool output longer than this many lines is folded (head and tail kept). */
export const FOLD_LINES = 12;
const HEAD = 6;
const TAIL = 3;

function isToolResult(m: Message): boolean {
  return Array.isArray(m.content) && (m.content as Block[]).some((b) => b.type === 'tool-result');
}

/**
 * The mark of a model-history message: a replacement copy (a seq the transcript does not have)
 * is a pruned tool result when it carries one, otherwise a compaction summary.
 */
export function historyMark(message: unknown, replacement: boolean): Mark {
  if (!replacement) return undefined;
  return isToolResult(message as Message) ? 'pruned' : 'summary';
}

function fold(text: string, full: boolean, style: Style): string {
  const lines = text.split('\n');
  if (full || lines.length <= FOLD_LINES) return text;
  const hidden = lines.length - HEAD - TAIL;
  return [...lines.slice(0, HEAD), style.dim(`… ${hidden} more lines (--full to show them)`), ...lines.slice(-TAIL)].join('\n');
}

function blockText(b: Block, style: Style, full: boolean): string {
  switch (b.type) {
    case 'text':
      return String(b.text);
    case 'reasoning':
      return style.dim(String(b.text));
    case 'tool-call':
      return style.magenta(`→ ${String(b.name)}(${String(b.arguments)})`);
    case 'tool-result': {
      const inner = Array.isArray(b.content) ? (b.content as Block[]).map((c) => blockText(c, style, true)).join('\n') : '';
      return style.magenta('← ') + fold(inner, full, style);
    }
    default:
      return style.dim(`[${String(b.type)}]`);
  }
}

const LABELS: Record<Exclude<Mark, undefined>, string> = {
  summary: '[compaction summary]',
  pruned: '[pruned tool result]',
  compacted: '[compacted: no longer on the surface]',
};

/** A derived message for people: `#seq role (id) [mark]` then its content (tool output folded). */
export function renderMessage(seq: number, message: unknown, style: Style, opts: { mark?: Mark; full?: boolean } = {}): string {
  const m = (message ?? {}) as Message;
  const role = String(m.role);
  const mark = opts.mark ? ` ${style.yellow(LABELS[opts.mark])}` : '';
  const head = `${style.dim(`#${seq}`)} ${role === 'assistant' ? style.green(role) : style.cyan(role)} ${style.dim(String(m.id ?? ''))}${mark}`;
  const body = Array.isArray(m.content) ? (m.content as Block[]).map((b) => blockText(b, style, opts.full === true)).join('\n') : '';
  return `${head}\n${body.replace(/^/gm, '  ')}\n`;
}

/** One line: `role: text` (tool calls and results abbreviated), cut to `width`. */
export function messageSummary(message: unknown, width: number): string {
  const m = (message ?? {}) as Message;
  const parts = Array.isArray(m.content) ? (m.content as Block[]).map((b) => {
    if (b.type === 'text' || b.type === 'reasoning') return String(b.text);
    if (b.type === 'tool-call') return `→ ${String(b.name)}(${String(b.arguments)})`;
    if (b.type === 'tool-result') return `← ${Array.isArray(b.content) ? (b.content as Block[]).map((c) => String(c.text ?? `[${String(c.type)}]`)).join(' ') : ''}`;
    return `[${String(b.type)}]`;
  }) : [];
  return truncate(`${String(m.role)}: ${parts.join(' ').replace(/\s+/g, ' ')}`, width);
}
