/**
 * import / export: reference JSONL streamed through ImportSession (client-streaming: options,
 * then byte chunks) and ExportSession (server-streaming chunks). Neither holds the file in memory:
 * import waits for `drain` on the call, export waits for `drain` on the output.
 */
import { createReadStream, createWriteStream, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import type { ClientWritableStream } from '@grpc/grpc-js';
import type { ExportSessionResponse, ImportSessionRequest, ImportSessionResponse } from '../../../gen/palimpsest/v1/service.js';
import type { Command, CommandContext } from '../command.js';
import { UsageError } from '../args.js';
import { VERSION } from '../version.js';
import { decodeJsonl } from '../../domain/jsonl-reader.js';
import type { SessionEvent } from '../../domain/event.js';
import { sessionToGenAiSpans } from '../../app/otel-genai.js';
import { GENAI_SEMCONV_VERSION } from '../../app/otel-genai-conventions.js';
import { otlpTraceRequest } from '../../app/otlp-json.js';
import type { Rpc } from '../client.js';
import { formatBytes, type Progress } from '../output.js';
import { openInput } from './events.js';
import { printId } from './sessions.js';
import { messageFormatOf, PROVIDER_FORMATS } from './provider-format.js';

async function readAll(stream: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(typeof c === 'string' ? Buffer.from(c) : (c as Buffer));
  return Buffer.concat(parts).toString('utf8');
}

const CHUNK_BYTES = 256 * 1024;

/** Streams `input` into an ImportSession call; stops early when the server answers first. */
async function streamImport(rpc: Rpc, options: ImportSessionRequest['part'], input: Readable, progress: Progress): Promise<ImportSessionResponse> {
  let call!: ClientWritableStream<ImportSessionRequest>;
  let answered = false;
  const result = new Promise<ImportSessionResponse>((resolve, reject) => {
    call = rpc.client.importSession(rpc.metadata(), {}, (err, res) => {
      answered = true;
      if (err) reject(err);
      else resolve(res);
    });
  });
  const settled = result.then(() => undefined, () => undefined);
  const pump = async (): Promise<void> => {
    call.write({ part: options });
    for await (const chunk of input as AsyncIterable<Buffer>) {
      if (answered) break;
      if (!call.write({ part: { $case: 'chunk', value: chunk } })) await Promise.race([once(call, 'drain'), settled]);
      progress.advance(chunk.length, chunk);
    }
    call.end();
  };
  let readError: unknown;
  const pumping = pump().catch((e: unknown) => {
    readError = e;
    call.cancel();
  });
  let ok = false;
  try {
    const res = await result;
    ok = true;
    return res;
  } catch (e) {
    await pumping;
    throw readError ?? e;
  } finally {
    // The header line is not an event.
    progress.finish(ok ? 'imported' : undefined, Math.max(0, progress.events - 1));
  }
}

const importCmd: Command = {
  name: 'import',
  summary: 'Imports a reference JSONL session (streamed; atomic) and prints its id.',
  details: 'The log is stored exactly as given (no automatic repair). A rejected file leaves no session behind; the\nerror metadata names the failing `line`. Seqs must be contiguous from 0 unless --allow-seq-gaps. As the reference loads a\nfile, a final line without its newline is an uncommitted tail: it is left out and the CLI says how many bytes\n(with --json, as "uncommittedTailBytes").',
  positionals: [{ name: 'FILE|-' }],
  options: {
    id: { type: 'string', value: 'ID', help: "session id (default the header's id)" },
    label: { type: 'string', multiple: true, value: 'KEY=VALUE', help: 'label to attach (repeatable)' },
    strict: { type: 'boolean', help: 'turn on the strict invariants for the imported session' },
    'allow-seq-gaps': { type: 'boolean', help: 'accept seq gaps (UI snapshots that elide events); by default the log must be contiguous from seq 0' },
    'pairing-guard': { type: 'boolean', help: 'turn on the tool-pairing guard (off by default: reference logs never had it)' },
    from: { type: 'string', value: 'FORMAT', help: `FILE is a conversation in a provider's format (${PROVIDER_FORMATS.join('|')}): a JSON array of its messages, written to a new session with ImportMessages` },
  },
  examples: ['palimpsest import ./session.jsonl --id demo-copy', 'zstd -dc session.jsonl.zstd | palimpsest import - --json', 'palimpsest import --from anthropic ./messages.json --id chat-1'],
  async run(ctx) {
    const { args, rpc, out, stdin } = ctx;
    const file = args.pos(0);
    const from = args.str('from');
    if (from !== undefined) {
      const format = messageFormatOf(from);
      const text = await readAll(file === '-' ? stdin : createReadStream(file));
      const created = await rpc.unary(rpc.client.createSession, { sessionId: args.str('id') ?? '', labels: args.labels(), strict: args.flag('strict'), pairingGuard: args.flag('pairing-guard') ? true : undefined });
      const id = created.session?.id ?? '';
      try {
        await rpc.unary(rpc.client.importMessages, { sessionId: id, format, messagesJson: text, provider: '', model: '' });
      } catch (e) {
        // Atomic from the caller's view: the new session goes when its import is refused.
        await rpc.unary(rpc.client.deleteSession, { sessionId: id }).catch(() => undefined);
        throw e;
      }
      await printId(ctx, created.session);
      return;
    }
    const total = file === '-' ? undefined : statSync(file).size;
    const options: ImportSessionRequest['part'] = {
      $case: 'options',
      value: { sessionId: args.str('id') ?? '', labels: args.labels(), strict: args.flag('strict'), allowSeqGaps: args.flag('allow-seq-gaps'), pairingGuard: args.flag('pairing-guard') },
    };
    const res = await streamImport(rpc, options, openInput(file, stdin, CHUNK_BYTES), out.progress('importing', total));
    const tail = res.uncommittedTailBytes;
    if (tail > 0 && out.json) {
      await out.printJson({ id: res.session?.id ?? '', uncommittedTailBytes: tail });
      return;
    }
    if (tail > 0) await out.write(`note: the file ends with an uncommitted tail of ${tail} bytes (a last line without its newline, as a crashed writer leaves it); it was left out, as the reference loads the file\n`, out.stderr);
    await printId(ctx, res.session);
  },
};

const exportCmd: Command = {
  name: 'export',
  summary: 'Writes a session as reference JSONL (streamed) to stdout or a file.',
  details: 'With -o the file is written under a temporary name and renamed when complete, so a failed export leaves\nno partial file. With -o, prints what it wrote (with --json {"id","file","bytes","lines"}; lines = event lines after the\nheader, packed chunk rows counting one).',
  positionals: [{ name: 'SESSION' }],
  options: {
    output: { type: 'string', short: 'o', value: 'FILE', help: 'write to FILE instead of stdout' },
    unpacked: { type: 'boolean', help: 'one line per assistant/chunk instead of packed chunk rows' },
    format: { type: 'string', value: 'jsonl|otel-genai', help: `jsonl (default: the reference session format) or otel-genai (OTLP/JSON traces following the OpenTelemetry GenAI semantic conventions ${GENAI_SEMCONV_VERSION}; see docs/otel-genai.md)` },
    content: { type: 'boolean', help: 'with --format otel-genai: record message content, tool arguments and results (opt-in attributes; may hold sensitive data)' },
  },
  examples: ['palimpsest export demo -o demo.jsonl', 'palimpsest export demo | jq -c .type', 'palimpsest export demo --format otel-genai -o demo.otlp.json'],
  async run(ctx) {
    const { args, rpc, out } = ctx;
    const format = args.str('format') ?? 'jsonl';
    if (format !== 'jsonl' && format !== 'otel-genai') throw new UsageError(`--format must be jsonl or otel-genai, got ${JSON.stringify(format)}`);
    if (format === 'jsonl' && args.flag('content')) throw new UsageError('--content applies to --format otel-genai only');
    if (format === 'otel-genai') return exportOtelGenai(ctx);
    const id = args.pos(0);
    const file = args.str('output');
    const tmp = file === undefined ? undefined : `${file}.partial-${process.pid}`;
    const dest = tmp === undefined ? out.stdout : createWriteStream(tmp);
    const progress = out.progress('exporting');
    let bytes = 0;
    const stream = rpc.client.exportSession({ sessionId: id, unpacked: args.flag('unpacked'), blobRefs: false }, rpc.metadata());
    async function* chunks(source: AsyncIterable<ExportSessionResponse>): AsyncGenerator<Uint8Array> {
      for await (const msg of source) {
        bytes += msg.chunk.length;
        progress.advance(msg.chunk.length, msg.chunk);
        yield msg.chunk;
      }
    }
    let ok = false;
    try {
      // pipeline: backpressure from the output, and a failure on either side tears down both.
      await pipeline(stream, chunks, dest, { end: tmp !== undefined });
      if (tmp !== undefined && file !== undefined) renameSync(tmp, file);
      ok = true;
    } catch (e) {
      stream.cancel();
      if (tmp !== undefined) rmSync(tmp, { force: true });
      throw e;
    } finally {
      // Lines are events plus the header line (packed chunk rows count as one line each).
      progress.finish(ok && file === undefined ? 'exported' : undefined, Math.max(0, progress.events - 1));
    }
    if (file === undefined) return;
    const lines = Math.max(0, progress.events - 1);
    if (out.json) await out.printJson({ id, file, bytes, lines });
    else await out.write(`wrote ${file}: ${id}, ${lines.toLocaleString('en-US')} event lines, ${formatBytes(bytes)}\n`);
  },
};

/**
 * `export --format otel-genai`: the session read through ExportSession (unpacked, so every chunk is
 * an event), mapped to GenAI spans and written as one OTLP/JSON ExportTraceServiceRequest.
 */
async function exportOtelGenai({ args, rpc, out }: CommandContext): Promise<void> {
  const id = args.pos(0);
  const file = args.str('output');
  const progress = out.progress('exporting');
  const parts: Buffer[] = [];
  let ok = false;
  try {
    for await (const msg of rpc.client.exportSession({ sessionId: id, unpacked: true, blobRefs: false }, rpc.metadata()) as AsyncIterable<ExportSessionResponse>) {
      progress.advance(msg.chunk.length, msg.chunk);
      parts.push(Buffer.from(msg.chunk));
    }
    ok = true;
  } finally {
    progress.finish(undefined, 0);
  }
  if (!ok) return;
  const { header, events } = decodeJsonl(Buffer.concat(parts).toString('utf8'));
  const spans = sessionToGenAiSpans(header.id, events as unknown as SessionEvent[], { content: args.flag('content') });
  const text = `${JSON.stringify(otlpTraceRequest(spans, { scopeVersion: VERSION }))}\n`;
  if (file === undefined) {
    await out.write(text);
    return;
  }
  const tmp = `${file}.partial-${process.pid}`;
  try {
    writeFileSync(tmp, text);
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  const traces = new Set(spans.map((s) => s.traceId)).size;
  if (out.json) await out.printJson({ id, file, format: 'otel-genai', spans: spans.length, traces });
  else await out.write(`wrote ${file}: ${id}, ${spans.length.toLocaleString('en-US')} spans in ${traces.toLocaleString('en-US')} traces (OTLP/JSON, GenAI semantic conventions ${GENAI_SEMCONV_VERSION})\n`);
}

/** The transfer commands, in help order. */
export const TRANSFER_COMMANDS: readonly Command[] = [importCmd, exportCmd];
