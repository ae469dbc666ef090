/**
 * Log and projection commands: append, events, surface, messages, repair.
 */
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { parseInteger } from '../args.js';
import { paginate, type Command } from '../command.js';
import { eventHeader, eventLine, eventObject } from '../format.js';
import { eventView } from '../event-view.js';
import { openPager } from '../pager.js';
import { FOLD_LINES, historyMark, renderMessage, type Mark } from '../message-view.js';
import { envelopesToEventInputs, parseEnvelopeLine, type EnvelopeLine } from '../../client/event-input.js';
import type { EventInput } from '../../../gen/palimpsest/v1/event.js';
import { DataFormat, Direction, MessageView } from '../../../gen/palimpsest/v1/service.js';
import type { Json } from '../../domain/event.js';
import { messageFormatOf, PROVIDER_FORMATS } from './provider-format.js';

/** The stream named by a FILE argument (`-` = stdin). */
export function openInput(file: string, stdin: Readable, highWaterMark?: number): Readable {
  return file === '-' ? stdin : createReadStream(file, { highWaterMark });
}

/** Reads one reference envelope per non-blank line (a batch is bounded by the server's batch limit). */
async function readBatch(input: Readable): Promise<EventInput[]> {
  const envelopes: EnvelopeLine[] = [];
  let lineNumber = 0;
  for await (const line of createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY })) {
    lineNumber++;
    if (line.trim() !== '') envelopes.push(parseEnvelopeLine(line, envelopes.length, lineNumber));
  }
  // The whole batch at once, so that a client-side refusal reports the server's first failure.
  return envelopesToEventInputs(envelopes);
}

function seqRange(seqs: readonly number[]): string {
  if (seqs.length === 0) return 'nothing';
  return seqs.length === 1 ? `seq ${seqs[0]}` : `seqs ${seqs[0]}..${seqs[seqs.length - 1]}`;
}

const append: Command = {
  name: 'append',
  summary: 'Appends events atomically, one reference JSON envelope per line; prints the assigned seqs.',
  details:
    'Each line: {"type","data","surfaceOp"?,"sourceEventSeqs"?,"ignorable"?,"seq"?,"time"?}. A given seq must be the\n' +
    "session's next one (SEQ_NOT_CONTIGUOUS). The first invalid event rejects the whole batch; with --json the error's\n" +
    'metadata.index names it (0-based among the events) and metadata.line its line when the client refused it.\n' +
    'Every core event type, its data, surfaceOp and citations, and the agent-loop order: docs/events.md. For\n' +
    'compaction and pruning use `palimpsest compact` / `palimpsest prune` (the server writes those events).',
  positionals: [{ name: 'SESSION' }, { name: 'FILE|-' }],
  options: {
    'expect-last-seq': { type: 'string', value: 'N', help: 'fail with HEAD_MISMATCH unless the last seq is N (-1 = the session is empty)' },
    'idempotency-key': { type: 'string', value: 'K', help: 'a retry with the same key returns the first result instead of appending again' },
  },
  examples: [
    `echo '{"type":"user/message","data":{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}' | palimpsest append demo -`,
  ],
  async run({ args, rpc, out, stdin }) {
    const events = await readBatch(openInput(args.pos(1), stdin));
    const expected = args.str('expect-last-seq');
    const res = await rpc.unary(rpc.client.appendEvents, {
      sessionId: args.pos(0), events, idempotencyKey: args.str('idempotency-key') ?? '',
      expectedLastSeq: expected === undefined ? undefined : parseInteger('--expect-last-seq', expected, -1),
    });
    if (out.json) await out.printJson({ seqs: res.seqs });
    else await out.write(`appended ${seqRange(res.seqs)}${res.replayed ? ' (replayed: already appended with this key)' : ''}; surface length ${res.surfaceLength}\n`);
  },
};

const events: Command = {
  name: 'events',
  summary: "Lists a session's events in seq order (one reference JSONL line per event with --json).",
  positionals: [{ name: 'SESSION' }],
  options: {
    after: { type: 'string', value: 'SEQ', help: 'only events after this seq' },
    limit: { type: 'string', value: 'N', help: 'at most N events' },
    type: { type: 'string', multiple: true, value: 'T', help: 'only events of this type (repeatable)' },
    full: { type: 'boolean', help: "each event's whole data below its row (pretty-printed, wrapped)" },
  },
  details: 'Chunk rows show the streamed text. With --json: one reference JSONL line per event (--full changes nothing).',
  examples: ['palimpsest events demo --after 10 --type user/message --json', 'palimpsest events demo --type assistant/chunk', 'palimpsest events demo --full'],
  async run({ args, rpc, out, env }) {
    const after = args.int('after');
    const limit = args.int('limit', 1);
    const width = out.width;
    const full = args.flag('full');
    // --full on a terminal goes through a pager ($PAGER, else less -FRX).
    const pager = full && !out.json ? openPager(out.stdout, env) : undefined;
    const to = pager?.stream;
    try {
      await listEvents();
    } finally {
      await pager?.close();
    }
    async function listEvents(): Promise<void> {
    if (!out.json) await out.write(eventHeader(out.style) + '\n', to);
    await paginate(
      limit,
      async (pageSize, pageToken) => {
        const r = await rpc.unary(rpc.client.listEvents, {
          sessionId: args.pos(0), fromSeq: after === undefined ? undefined : after + 1, direction: Direction.DIRECTION_FORWARD,
          pageSize, pageToken, types: args.list('type'), dataFormat: DataFormat.DATA_FORMAT_JSON, blobRefs: false,
        });
        return { items: r.events, nextPageToken: r.nextPageToken };
      },
      async (page) => {
        const lines = page.map((e) => (out.json ? out.jsonLine(eventLine(e)) : eventView(e, out.style, width, full)));
        if (lines.length > 0) await out.write(lines.join('\n') + '\n', to);
      },
    );
    }
  },
};

const asOf = { 'as-of': { type: 'string', value: 'SEQ', help: 'as it was right after event SEQ (time travel)' } } as const;

const surface: Command = {
  name: 'surface',
  summary: 'Prints the surface (the ordered seqs of the model-visible events) as a JSON array.',
  positionals: [{ name: 'SESSION' }],
  options: { ...asOf },
  examples: ['palimpsest surface demo', 'palimpsest surface demo --as-of 41'],
  async run({ args, rpc, out }) {
    const r = await rpc.unary(rpc.client.getSurface, { sessionId: args.pos(0), asOfSeq: args.int('as-of') });
    await out.write(out.jsonLine(JSON.stringify(r.seqs)).replace(/^---\n/, '') + '\n');
  },
};

const messages: Command = {
  name: 'messages',
  summary: 'Prints the model history derived from the surface (or the human transcript).',
  details:
    'Compaction summaries and pruned tool results are marked, and so (with --transcript) are messages compacted\n' +
    `away; tool output longer than ${FOLD_LINES} lines is folded (--full shows it all).\n` +
    'With --json: a JSON array of the message objects exactly as stored ({id, role, content, source}).',
  positionals: [{ name: 'SESSION' }],
  options: {
    transcript: { type: 'boolean', help: 'the human transcript (append-origin events, including compacted ones)' },
    full: { type: 'boolean', help: 'do not fold long tool output' },
    format: { type: 'string', value: 'FORMAT', help: `the model history as a provider's request messages: ${PROVIDER_FORMATS.join('|')} (docs/providers.md); with --json the array to send` },
    'drop-unpaired': { type: 'boolean', help: 'with --format: leave out results without their call and answer calls without a result, instead of refusing' },
    annotated: { type: 'boolean', help: 'with --format --json: each element {seqs, tokens, message} instead of the bare message (docs/providers.md "Token counts")' },
    ...asOf,
  },
  examples: ['palimpsest messages demo --json', 'palimpsest messages demo --transcript', 'palimpsest messages demo --full', 'palimpsest messages demo --as-of 41   # what the model saw then', 'palimpsest messages demo --format anthropic --json', 'palimpsest messages demo --format gemini --json --annotated   # with seqs and tokens'],
  async run({ args, rpc, out }) {
    const sessionId = args.pos(0);
    // Paged, so a history larger than one gRPC message still prints.
    // With --as-of, every read (the marks' reads too) is as of that seq.
    const asOfSeq = args.int('as-of');
    const formatName = args.str('format');
    if (formatName !== undefined) {
      const format = messageFormatOf(formatName);
      const rendered: { seqs: number[]; tokens: number; json: Json }[] = [];
      let pageToken = '';
      do {
        const r = await rpc.unary(rpc.client.getMessages, { sessionId, view: MessageView.MESSAGE_VIEW_MODEL_HISTORY, typed: false, pageSize: 1000, pageToken, asOfSeq, format, dropUnpaired: args.flag('drop-unpaired'), blobRefs: false });
        for (const m of r.rendered) rendered.push({ seqs: m.seqs, tokens: m.tokens, json: JSON.parse(m.providerJson) as Json });
        pageToken = r.nextPageToken;
      } while (pageToken !== '');
      if (out.json) return void await out.printJson(args.flag('annotated') ? rendered.map((m) => ({ seqs: m.seqs, tokens: m.tokens, message: m.json })) : rendered.map((m) => m.json));
      if (rendered.length === 0) return void await out.write(out.style.dim('no messages\n'));
      const total = rendered.reduce((sum, m) => sum + m.tokens, 0);
      await out.write(rendered.map((m) => `${out.style.dim(`# from seq ${m.seqs.join(', ') || '(none: written by --drop-unpaired)'} · ≈${m.tokens} tokens`)}\n${JSON.stringify(m.json, null, 2)}\n`).join('') +
        out.style.dim(`# ${rendered.length} messages · ≈${total} tokens\n`));
      return;
    }
    const read = async (view: MessageView): Promise<{ seq: number; message: Json }[]> => {
      const parsed: { seq: number; message: Json }[] = [];
      let pageToken = '';
      do {
        const r = await rpc.unary(rpc.client.getMessages, { sessionId, view, typed: false, pageSize: 1000, pageToken, asOfSeq, format: 0, dropUnpaired: false, blobRefs: false });
        for (const m of r.messages) parsed.push({ seq: m.seq, message: JSON.parse(m.messageJson) as Json });
        pageToken = r.nextPageToken;
      } while (pageToken !== '');
      return parsed;
    };
    const transcript = args.flag('transcript');
    const parsed = await read(transcript ? MessageView.MESSAGE_VIEW_TRANSCRIPT : MessageView.MESSAGE_VIEW_MODEL_HISTORY);
    if (out.json) return void await out.printJson(parsed.map((m) => m.message));
    if (parsed.length === 0) return void await out.write(out.style.dim('no messages\n'));
    // Marks: a model-history message the transcript lacks is a replacement copy (summary or prune);
    // a transcript message not on the surface was compacted away.
    let mark: (seq: number, message: Json) => Mark;
    if (transcript) {
      const surface = new Set((await rpc.unary(rpc.client.getSurface, { sessionId, asOfSeq })).seqs);
      mark = (seq) => (surface.has(seq) ? undefined : 'compacted');
    } else {
      const original = new Set((await read(MessageView.MESSAGE_VIEW_TRANSCRIPT)).map((m) => m.seq));
      mark = (seq, message) => historyMark(message, !original.has(seq));
    }
    const full = args.flag('full');
    await out.write(parsed.map((m) => renderMessage(m.seq, m.message, out.style, { mark: mark(m.seq, m.message), full })).join('\n'));
  },
};

const repair: Command = {
  name: 'repair',
  summary: 'Appends crash-repair closers for orphaned tool calls of the open turn and prints them.',
  details: 'Idempotent: a balanced log gets nothing. With --json: a JSON array of the appended events (reference envelope).',
  positionals: [{ name: 'SESSION' }],
  options: {},
  examples: ['palimpsest repair demo --json'],
  async run({ args, rpc, out }) {
    const r = await rpc.unary(rpc.client.repairSession, { sessionId: args.pos(0) });
    if (out.json) await out.printJson(r.events.map(eventObject));
    else if (r.events.length === 0) await out.write('nothing to repair: the open turn has no orphaned tool calls\n');
    else await out.write(`appended ${r.events.length} closer(s):\n${r.events.map(eventLine).join('\n')}\n`);
  },
};

/** The log and projection commands, in help order. */
export const EVENT_COMMANDS: readonly Command[] = [append, events, surface, messages, repair];
