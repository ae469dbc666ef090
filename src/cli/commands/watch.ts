/**
 * watch: follows a session through SubscribeSurface (surface deltas) or SubscribeEvents
 * (`--events`), one line per stream message, until Ctrl-C (which cancels the stream; exit 0).
 */
import { status, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import type { Command } from '../command.js';
import type { Output } from '../output.js';
import { eventHeader, eventLine, eventRow } from '../format.js';
import { DataFormat, type SubscribeEventsResponse, type SubscribeSurfaceResponse } from '../../../gen/palimpsest/v1/service.js';
import { resuming } from '../resume.js';
import { messageSummary } from '../message-view.js';

type Line = { json: Record<string, unknown> | string; text: string };

function signal(cursor: number | undefined, name: string, out: Output): Line {
  return { json: { cursor: cursor ?? null, signal: name }, text: out.style.dim(`${name} (cursor ${cursor ?? '-'})`) };
}

/** With --messages: the derived message as JSON, and its text for people. */
function withMessage(m: SubscribeSurfaceResponse, messages: boolean, width: number): { json: Record<string, unknown>; text: string } {
  if (!messages || !m.message?.messageJson) return { json: {}, text: '' };
  const message = JSON.parse(m.message.messageJson) as unknown;
  return { json: { message }, text: `  ${messageSummary(message, Math.max(20, width - 30))}` };
}

/** One SubscribeSurface message as a line. */
function surfaceLine(m: SubscribeSurfaceResponse, out: Output, messages = false, width = 80): Line | undefined {
  const cursor = m.cursor ?? null;
  const k = m.kind;
  switch (k?.$case) {
    case 'append': {
      const msg = withMessage(m, messages, width);
      return { json: { cursor, op: 'append', seq: k.value.seq, ...msg.json }, text: `${out.style.green('append ')}  ${k.value.seq}${msg.text}` };
    }
    case 'replace': {
      const { start, end, seq, shadowedSeqs } = k.value;
      const msg = withMessage(m, messages, width);
      return {
        json: { cursor, op: 'replace', start, end, seq, shadowed: shadowedSeqs, ...msg.json },
        text: `${out.style.yellow('replace')}  ${start}..${end} -> ${seq}  ${out.style.dim(`shadowed ${JSON.stringify(shadowedSeqs)}`)}${msg.text}`,
      };
    }
    case 'snapshot':
      return { json: { cursor, op: 'snapshot', seqs: k.value.seqs }, text: `${out.style.cyan('snapshot')} ${JSON.stringify(k.value.seqs)}` };
    case 'checkpoint':
      return signal(m.cursor, 'checkpoint', out);
    case 'caughtUp':
      return signal(m.cursor, 'caught-up', out);
    case 'heartbeat':
      return signal(m.cursor, 'heartbeat', out);
    default:
      return undefined;
  }
}

/** One SubscribeEvents message as a line: the event in the reference envelope, or a signal. */
function eventsLine(m: SubscribeEventsResponse, out: Output, width: number): Line | undefined {
  const k = m.kind;
  switch (k?.$case) {
    case 'event':
      return { json: eventLine(k.value), text: eventRow(k.value, out.style, width) };
    case 'caughtUp':
      return signal(m.cursor, 'caught-up', out);
    case 'heartbeat':
      return signal(m.cursor, 'heartbeat', out);
    default:
      return undefined;
  }
}

const watch: Command = {
  name: 'watch',
  summary: 'Follows a session: one line per surface delta (or per event with --events) until Ctrl-C.',
  details:
    'With --json, one JSON object per line: {"cursor":N,"op":"append","seq":N},\n' +
    '{"cursor":N,"op":"replace","start":S,"end":E,"seq":N,"shadowed":[...]}, {"cursor":N,"op":"snapshot","seqs":[...]} or\n' +
    '{"cursor":N,"signal":"caught-up"|"heartbeat"|"checkpoint"} (cursor is null before any event). With --events, events\n' +
    'are printed in the reference envelope (signal lines as above). With --messages, append/replace lines carry the\n' +
    'derived message ("message" in JSON, its text otherwise). After a dropped connection or a server restart, watch\n' +
    'resumes by itself after the last cursor it printed (a note on stderr; --no-reconnect exits 3 instead).\n' +
    'Resume a later run with --after <last cursor>.',
  positionals: [{ name: 'SESSION' }],
  options: {
    after: { type: 'string', value: 'SEQ', help: 'resume after this cursor (default from the start)' },
    events: { type: 'boolean', help: 'every event (SubscribeEvents) instead of surface deltas' },
    snapshot: { type: 'boolean', help: 'start with a snapshot of the current surface (surface mode; ignores --after)' },
    heartbeat: { type: 'string', value: 'MS', help: 'heartbeat interval (default the server\'s; minimum 100)' },
    messages: { type: 'boolean', help: 'show the text of what joins the surface (surface mode)' },
    'no-reconnect': { type: 'boolean', help: 'exit (status 3) when the connection drops instead of resuming' },
    wait: { type: 'boolean', help: 'wait for the session to be created instead of failing (start before the agent)' },
  },
  examples: ['palimpsest watch demo --json', 'palimpsest watch demo --events --after 41', 'palimpsest watch demo --wait'],
  async run({ args, rpc, out }) {
    const sessionId = args.pos(0);
    const afterSeq = args.int('after');
    const heartbeatIntervalMs = args.int('heartbeat', 100) ?? 0;
    const width = out.width;
    const events = args.flag('events');
    const messages = args.flag('messages');
    const waitForCreate = args.flag('wait');
    type Msg = SubscribeSurfaceResponse | SubscribeEventsResponse;
    const open = (after: number | undefined, first: boolean): ClientReadableStream<Msg> => (events
      ? rpc.client.subscribeEvents({ sessionId, afterSeq: after, heartbeatIntervalMs, dataFormat: DataFormat.DATA_FORMAT_JSON, waitForCreate, blobRefs: false }, rpc.metadata())
      // --snapshot only for the first stream: a resumed one continues from its cursor.
      : rpc.client.subscribeSurface({ sessionId, afterSeq: first && args.flag('snapshot') ? undefined : after, heartbeatIntervalMs, snapshot: first && args.flag('snapshot'), includeMessages: messages, dataFormat: DataFormat.DATA_FORMAT_JSON, waitForCreate, blobRefs: false }, rpc.metadata()));
    const render = events
      ? (m: unknown) => eventsLine(m as SubscribeEventsResponse, out, width)
      : (m: unknown) => surfaceLine(m as SubscribeSurfaceResponse, out, messages, width);
    let interrupted = false;
    let current: ClientReadableStream<Msg> | undefined;
    const stop = (): void => {
      interrupted = true;
      current?.cancel();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    const onRetry = (cursor: number | undefined, err: ServiceError, delayMs: number): void => {
      out.stderr.write(`${out.errStyle.dim(`connection lost (${err.details || status[err.code]}); resuming after cursor ${cursor ?? '-'} in ${delayMs} ms`)}\n`);
    };
    try {
      if (!out.json && events) await out.write(eventHeader(out.style) + '\n');
      const stream = resuming<Msg>(open, { after: afterSeq, reconnect: !args.flag('no-reconnect'), onRetry, stopped: () => interrupted }, (s) => { current = s; });
      for await (const m of stream) {
        const line = render(m);
        if (line === undefined) continue;
        await out.write((out.json ? out.jsonLine(typeof line.json === 'string' ? line.json : JSON.stringify(line.json)) : line.text) + '\n');
      }
    } catch (e) {
      if (interrupted && (e as Partial<ServiceError>).code === status.CANCELLED) return 0;
      throw e;
    } finally {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    }
    return 0;
  },
};

/** The follow commands. */
export const WATCH_COMMANDS: readonly Command[] = [watch];
