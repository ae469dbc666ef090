/**
 * `palimpsest export S --format otel-genai [-o FILE] [--content]` (issue #41): a recorded reference
 * session imported through the CLI comes back as one OTLP/JSON ExportTraceServiceRequest that an
 * OTLP/HTTP receiver accepts, with exactly the spans of the mapping; the bad flag combinations
 * are usage errors that write nothing.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { ensureBuilt } from '../support/server-process.js';
import { cliFor, type CliResult } from '../support/cli.js';
import { postTraces, startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.js';
import { decodeJsonl } from '../../src/domain/jsonl-reader.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { sessionToGenAiSpans } from '../../src/app/otel-genai.js';

const FIXTURE = new URL('../fixtures/reference-sessions/cordis-tool-round.jsonl', import.meta.url).pathname;

let t: TestServer;
let cli: (...args: string[]) => Promise<CliResult>;
let receiver: OtlpReceiver;

beforeAll(async () => {
  ensureBuilt();
  t = await startTestServer();
  cli = cliFor(t.server.address);
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await receiver.close();
  await t.stop();
});

describe('export --format otel-genai', () => {
  it('writes the span tree of a reference session with tool calls as OTLP/JSON a receiver accepts', async () => {
    const { header, events } = decodeJsonl(readFileSync(FIXTURE, 'utf8'));
    const imported = await cli('import', FIXTURE, '--allow-seq-gaps', '--json');
    expect(imported.stderr).toBe('');
    expect(JSON.parse(imported.stdout)).toEqual({ id: header.id });

    const out = join(t.dir, 'cordis.otlp.json');
    const res = await cli('export', header.id, '--format', 'otel-genai', '-o', out, '--json');
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const want = sessionToGenAiSpans(header.id, events as unknown as SessionEvent[]);
    expect(JSON.parse(res.stdout)).toEqual({ id: header.id, file: out, format: 'otel-genai', spans: want.length, traces: 1 });

    const body = readFileSync(out, 'utf8');
    expect(await postTraces(receiver.endpoint, body)).toBe(200);
    const got = receiver.spans.splice(0);
    expect(got.map((s) => [s.spanId, s.parentSpanId, s.name])).toEqual(want.map((s) => [s.spanId, s.parentSpanId, s.name]));
    expect(got.filter((s) => s.name.startsWith('execute_tool ')).map((s) => s.attributes['gen_ai.tool.call.id'])).toHaveLength(3);
    expect(got.every((s) => s.attributes['gen_ai.conversation.id'] === header.id)).toBe(true);
    expect(got.some((s) => 'gen_ai.output.messages' in s.attributes)).toBe(false);

    // stdout carries the same document; --content adds the opt-in content attributes.
    const stdout = await cli('export', header.id, '--format', 'otel-genai');
    expect(stdout.stdout).toBe(body);
    const withContent = await cli('export', header.id, '--format', 'otel-genai', '--content');
    expect(await postTraces(receiver.endpoint, withContent.stdout)).toBe(200);
    expect(receiver.spans.splice(0).some((s) => 'gen_ai.output.messages' in s.attributes)).toBe(true);
  });

  it('refuses an unknown format and --content without otel-genai, writing nothing', async () => {
    const out = join(t.dir, 'never.json');
    const bad = await cli('export', 'whatever', '--format', 'otlp', '-o', out);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--format must be jsonl or otel-genai/);
    const content = await cli('export', 'whatever', '--content', '-o', out);
    expect(content.code).not.toBe(0);
    expect(content.stderr).toMatch(/--content applies to --format otel-genai only/);
    expect(existsSync(out)).toBe(false);
  });
});
