/**
 * The live GenAI export's rules (src/app/otel-genai-live.ts), over the memory store: a turn is
 * exported once its turn/end commits; a first start takes existing history as exported (an open
 * turn is exported when it ends); a refused export is retried and the position does not move
 * until the sink accepts; a crash between export and saving the position exports the turn again
 * with the very same ids; a restart exports what was committed while no exporter ran.
 */
import { describe, expect, it } from 'vitest';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import { LocalChangeFeed } from '../../src/app/local-change-feed.js';
import { LiveGenAiExporter, TappedChangeFeed, type SpanSink } from '../../src/app/otel-genai-live.js';
import { genAiSpanId, genAiTraceId, type GenAiSpan } from '../../src/app/otel-genai-conventions.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { MemoryExportPositions } from '../../src/store/otel-genai-positions.js';
import type { CandidateEvent } from '../../src/domain/event.js';
import { waitFor } from '../support/poll.js';

const ctx = ANONYMOUS;

/** The 8 events of one tool-calling turn starting at seq `base`. */
function turn(n: number, base: number): CandidateEvent[] {
  const callId = `call-${n}`;
  return [
    { type: 'turn/start', data: { turn: n } },
    { type: 'user/message', data: { id: `u${n}`, role: 'user', content: [{ type: 'text', text: `question ${n}` }], source: { kind: 'user' } }, surfaceOp: 'append' },
    { type: 'step/start', data: { turn: n, step: 1 } },
    {
      type: 'assistant/message', surfaceOp: 'append', sourceEventSeqs: [],
      data: { turn: n, step: 1, usage: { inputTokens: 10, outputTokens: 5 }, message: { id: `a${n}`, role: 'assistant', content: [{ type: 'tool-call', id: callId, name: 'bash', arguments: '{}' }], source: { kind: 'model', provider: 'openai', model: 'gpt-4.1' } } },
    },
    { type: 'tool/call', data: { turn: n, step: 1, callId, name: 'bash', arguments: '{}' } },
    {
      type: 'tool/result', surfaceOp: 'append', sourceEventSeqs: [base + 4],
      data: { turn: n, step: 1, message: { id: `r${n}`, role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: 'ok' }] }] } },
    },
    { type: 'step/end', data: { turn: n, step: 1 } },
    { type: 'turn/end', data: { turn: n, reason: { kind: 'completed' } } },
  ];
}

/** A sink that keeps what it accepted and refuses the next `refuse` exports. */
function collector(): SpanSink & { spans: GenAiSpan[]; refuse: number; calls: number } {
  const sink = {
    spans: [] as GenAiSpan[], refuse: 0, calls: 0,
    async export(spans: readonly GenAiSpan[]): Promise<void> {
      sink.calls++;
      if (sink.refuse > 0) {
        sink.refuse--;
        throw new Error('collector unavailable');
      }
      sink.spans.push(...spans);
    },
    async shutdown(): Promise<void> {},
  };
  return sink;
}

/** An app over `store` whose commits reach whichever exporter `holder.live` names. */
function appOver(store: MemorySessionStore, holder: { live?: LiveGenAiExporter }): SessionService {
  return new SessionService(store, undefined, () => 1_000, undefined, undefined, new TappedChangeFeed(new LocalChangeFeed(), (b) => holder.live?.onCommit(b)));
}

const roots = (spans: readonly GenAiSpan[]): string[] => spans.filter((s) => s.parentSpanId === undefined).map((s) => s.traceId);

describe('live GenAI export', () => {
  it('exports a turn when its turn/end commits, not before', async () => {
    const store = new MemorySessionStore();
    const holder: { live?: LiveGenAiExporter } = {};
    const app = appOver(store, holder);
    const sink = collector();
    holder.live = new LiveGenAiExporter(store, sink, new MemoryExportPositions(), { retryMs: 5 });
    await holder.live.start();
    await app.createSession(ctx, { id: 's' });
    const t1 = turn(1, 0);
    await app.append(ctx, 's', t1.slice(0, 7));
    await holder.live.idle();
    expect(sink.spans).toEqual([]);
    await app.append(ctx, 's', t1.slice(7));
    await holder.live.idle();
    expect(roots(sink.spans)).toEqual([genAiTraceId('s', 0)]);
    expect(sink.spans.map((s) => s.name)).toEqual(['invoke_agent', 'chat gpt-4.1', 'execute_tool bash']);
  });

  it('commits heard before start() are exported from the saved positions, never from seq 0 (a replica that started late)', async () => {
    const store = new MemorySessionStore();
    const holder: { live?: LiveGenAiExporter } = {};
    const app = appOver(store, holder);
    const positions = new MemoryExportPositions();
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', turn(1, 0));
    // Turn 1 was exported by an earlier run: its position is saved.
    await positions.save('s', 8);
    const sink = collector();
    holder.live = new LiveGenAiExporter(store, sink, positions, { retryMs: 5 });
    // A turn commits while the exporter exists but has not started (the store was still opening).
    await app.append(ctx, 's', turn(2, 8));
    await new Promise((r) => setTimeout(r, 20));
    expect(sink.calls).toBe(0);
    await holder.live.start();
    await holder.live.idle();
    // Only turn 2, once.
    expect(roots(sink.spans)).toEqual([genAiTraceId('s', 8)]);
  });

  it('a first start takes history as exported; a turn open at that time is exported whole when it ends', async () => {
    const store = new MemorySessionStore();
    const holder: { live?: LiveGenAiExporter } = {};
    const app = appOver(store, holder);
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', turn(1, 0));
    const t2 = turn(2, 8);
    await app.append(ctx, 's', t2.slice(0, 2));
    const sink = collector();
    holder.live = new LiveGenAiExporter(store, sink, new MemoryExportPositions(), { retryMs: 5 });
    await holder.live.start();
    await holder.live.idle();
    expect(sink.spans).toEqual([]);
    await app.append(ctx, 's', t2.slice(2));
    await holder.live.idle();
    expect(roots(sink.spans)).toEqual([genAiTraceId('s', 8)]);
    expect(sink.spans.find((s) => s.parentSpanId === undefined)?.attributes['palimpsest.seq.start']).toBe(8);
  });

  it('a refused export is retried; the position moves only once the sink accepted', async () => {
    const store = new MemorySessionStore();
    const holder: { live?: LiveGenAiExporter } = {};
    const app = appOver(store, holder);
    const positions = new MemoryExportPositions();
    const sink = collector();
    sink.refuse = 2;
    holder.live = new LiveGenAiExporter(store, sink, positions, { retryMs: 5 });
    await holder.live.start();
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', turn(1, 0));
    await holder.live.idle();
    expect((await positions.load())?.get('s') ?? 0).toBe(0);
    await waitFor(() => sink.spans.length > 0, 5_000, 'the retried export');
    await holder.live.idle();
    expect(sink.calls).toBe(3);
    expect((await positions.load())?.get('s')).toBe(8);
    expect(roots(sink.spans)).toEqual([genAiTraceId('s', 0)]);
    await holder.live.close();
  });

  it('a crash between export and saving the position exports the turn again with the same ids; a saved turn is not repeated', async () => {
    const store = new MemorySessionStore();
    const holder: { live?: LiveGenAiExporter } = {};
    const app = appOver(store, holder);
    const positions = new MemoryExportPositions();
    const first = collector();
    holder.live = new LiveGenAiExporter(store, first, positions, { retryMs: 5 });
    await holder.live.start();
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', turn(1, 0));
    await holder.live.idle();
    // Turn 2 is exported, then the process dies before its position is saved.
    const save = positions.save.bind(positions);
    positions.save = async () => { throw new Error('killed'); };
    await app.append(ctx, 's', turn(2, 8));
    await waitFor(() => first.spans.length >= 6, 5_000, 'turn 2 exported');
    await holder.live.close();
    holder.live = undefined;
    positions.save = save;
    expect((await positions.load())?.get('s')).toBe(8);

    const second = collector();
    const restarted = new LiveGenAiExporter(store, second, positions, { retryMs: 5 });
    await restarted.start();
    await restarted.idle();
    expect(roots(second.spans)).toEqual([genAiTraceId('s', 8)]);
    expect(second.spans.map((s) => s.spanId)).toEqual(first.spans.slice(3, 6).map((s) => s.spanId));
    expect(second.spans[0]?.spanId).toBe(genAiSpanId('s', 8, 'invoke_agent'));
    expect((await positions.load())?.get('s')).toBe(16);
  });

  it('a restart exports the turns committed while no exporter ran (another process, a crash)', async () => {
    const store = new MemorySessionStore();
    const holder: { live?: LiveGenAiExporter } = {};
    const app = appOver(store, holder);
    const positions = new MemoryExportPositions();
    holder.live = new LiveGenAiExporter(store, collector(), positions, { retryMs: 5 });
    await holder.live.start();
    await holder.live.close();
    holder.live = undefined;
    await app.createSession(ctx, { id: 'a' });
    await app.append(ctx, 'a', [...turn(1, 0), ...turn(2, 8)]);
    const sink = collector();
    const restarted = new LiveGenAiExporter(store, sink, positions, { retryMs: 5 });
    await restarted.start();
    await restarted.idle();
    expect(roots(sink.spans)).toEqual([genAiTraceId('a', 0), genAiTraceId('a', 8)]);
  });
});
