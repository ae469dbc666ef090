/**
 * In-process engine benchmark: the chunked SessionEngine against a naive reference-style
 * implementation (one surface array + indexOf + splice, history rebuilt after every replace),
 * both doing the same per-event validation (normalizeCandidate).
 *
 *   npx tsx bench/engine.bench.ts [--quick]
 *
 * Prints a markdown table of medians over >= 5 runs with min-max.
 */
import v8 from 'node:v8';

v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');
v8.setFlagsFromString('--expose-gc');
const vm = await import('node:vm');
/** Full GC before each timed section, so setup garbage is not billed to the measured operation. */
const gc = vm.runInNewContext('gc') as () => void;

const { SessionEngine } = await import('../src/domain/session-engine.js');
const { MessageProjection, deriveMessages } = await import('../src/domain/derive.js');
const { normalizeCandidate } = await import('../src/domain/validate-event.js');
const { SURFACE_TYPES } = await import('../src/domain/event.js');
const { rewriteChangesOnlyContent } = await import('../src/domain/tool-result-rewrite.js');
type CandidateEvent = import('../src/domain/event.js').CandidateEvent;
type SessionEvent = import('../src/domain/event.js').SessionEvent;
type StructuralRow = import('../src/app/store-port.js').StructuralRow;

const quick = process.argv.includes('--quick');
const RUNS = quick ? 5 : 7;
const APPENDS = quick ? 10_000 : 40_000;
const PRUNES = quick ? 5_000 : 20_000;
const HISTORY_READS = quick ? 20 : 50;

// ---------------------------------------------------------------- workload builders

/** A realistic event mix per "step": chunks, an assistant message, a tool call and its result. */
function stepCandidates(step: number): CandidateEvent[] {
  const out: CandidateEvent[] = [];
  for (let i = 0; i < 5; i++) out.push({ type: 'assistant/chunk', data: { turn: 1, step, chunk: { type: 'text-delta', index: 0, text: 'tok' } } });
  out.push({
    type: 'assistant/message',
    data: { turn: 1, step, message: { id: `a${step}`, role: 'assistant', content: [{ type: 'text', text: 'ok' }], source: { kind: 'model', provider: 'p', model: 'm' } }, usage: { inputTokens: 10, outputTokens: 2 } },
    surfaceOp: 'append',
  });
  out.push({ type: 'tool/call', data: { turn: 1, step, callId: `c${step}`, name: 'bash', arguments: '{"command":"ls"}' } });
  out.push({ type: 'tool/result', data: toolData(step, 'file-a\nfile-b\nfile-c'), surfaceOp: 'append' });
  return out;
}

function toolData(step: number, text: string): Record<string, unknown> {
  return {
    turn: 1,
    step,
    message: { id: `r${step}`, role: 'user', source: { kind: 'tool', callId: `c${step}` }, content: [{ type: 'tool-result', toolCallId: `c${step}`, content: [{ type: 'text', text }], isError: false }] },
  };
}

/** Structural rows of a log of n events with the same mix (for fast preloading). */
function structuralRows(n: number): StructuralRow[] {
  const rows: StructuralRow[] = [];
  const types = ['assistant/chunk', 'assistant/chunk', 'assistant/chunk', 'assistant/chunk', 'assistant/chunk', 'assistant/message', 'tool/call', 'tool/result'];
  for (let seq = 0; seq < n; seq++) {
    const type = types[seq % types.length] as string;
    rows.push(SURFACE_TYPES.has(type) ? { seq, type, surfaceOp: 'append' } : { seq, type });
  }
  return rows;
}

// ---------------------------------------------------------------- naive reference-style engine

/** The upstream shape: a surface array, indexOf for endpoints, full history rebuild after a replace. */
class NaiveEngine {
  surface: number[] = [];
  types: string[] = [];
  nextSeq = 0;
  generation = 0;
  private history: unknown[] | null = null;
  private historyGeneration = -1;
  private historyLength = 0;

  load(rows: readonly StructuralRow[]): void {
    for (const r of rows) {
      this.types[r.seq] = r.type;
      if (r.surfaceOp === 'append') this.surface.push(r.seq);
      this.nextSeq = r.seq + 1;
    }
  }

  /** Plan + commit one candidate the reference way. */
  append(c: CandidateEvent, lookup: (seq: number) => SessionEvent | undefined): SessionEvent {
    const { event } = normalizeCandidate(c, { mode: 'append', nextSeq: this.nextSeq, eventCount: this.nextSeq, now: () => 0 });
    const op = event.surfaceOp;
    if (op !== undefined && op !== 'append') {
      const i = this.surface.indexOf(op.start);
      const j = this.surface.indexOf(op.end);
      if (i < 0 || j < 0 || i > j) throw new Error('bad range');
      const shadowed = this.surface.slice(i, j + 1);
      const cited = new Set(event.sourceEventSeqs ?? []);
      for (const s of shadowed) if (!cited.has(s)) throw new Error('incomplete');
      if (event.type === 'tool/result') {
        const target = lookup(op.start);
        if (target === undefined || !rewriteChangesOnlyContent(event, target, 's', lookup)) throw new Error('non-content');
      }
      this.surface.splice(i, j - i + 1, event.seq);
      this.generation++;
    } else if (op === 'append') {
      this.surface.push(event.seq);
    }
    this.types[event.seq] = event.type;
    this.nextSeq = event.seq + 1;
    return event;
  }

  /** deriveMessages with the reference's cache: rebuilt whenever replaceGeneration changed. */
  messages(lookup: (seq: number) => SessionEvent | undefined): unknown[] {
    if (this.history === null || this.historyGeneration !== this.generation || this.historyLength !== this.surface.length) {
      this.history = deriveMessages(this.surface, lookup, 's');
      this.historyGeneration = this.generation;
      this.historyLength = this.surface.length;
    }
    return this.history.slice();
  }
}

// ---------------------------------------------------------------- measurement

interface Stat {
  median: number;
  min: number;
  max: number;
}

function stats(xs: number[]): Stat {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)] as number, min: s[0] as number, max: s[s.length - 1] as number };
}

function runs(fn: () => number): Stat {
  fn(); // warm-up
  const xs: number[] = [];
  for (let i = 0; i < RUNS; i++) xs.push(fn());
  return stats(xs);
}

/** Runs several measurements interleaved (A B C A B C …) so machine noise hits all alike. */
function interleaved(fns: (() => number)[]): Stat[] {
  for (const f of fns) f(); // warm-up
  const xs: number[][] = fns.map(() => []);
  for (let i = 0; i < RUNS; i++) fns.forEach((f, k) => (xs[k] as number[]).push(f()));
  return xs.map(stats);
}

const ctxFor = (lookup: (seq: number) => SessionEvent | undefined) => ({ mode: 'append' as const, now: () => 0, sessionId: 's', lookup });

const appendBatch: CandidateEvent[] = [];
for (let step = 1; appendBatch.length < APPENDS; step++) appendBatch.push(...stepCandidates(step));
appendBatch.length = APPENDS;

/** One run: appends APPENDS events one by one onto a log of `base` events; events/s. */
function appendRun(base: number, naive: boolean): () => number {
  const rows = structuralRows(base);
  const lookup = (): SessionEvent | undefined => undefined;
  return () => {
    if (naive) {
      const e = new NaiveEngine();
      e.load(rows);
      gc();
      const t0 = performance.now();
      for (const c of appendBatch) e.append(c, lookup);
      return APPENDS / ((performance.now() - t0) / 1000);
    }
    const e = SessionEngine.create();
    e.loadStructural(rows);
    const ctx = ctxFor(lookup);
    const one: CandidateEvent[] = [appendBatch[0] as CandidateEvent];
    gc();
    const t0 = performance.now();
    for (const c of appendBatch) {
      one[0] = c;
      e.commit(e.plan(one, ctx));
    }
    return APPENDS / ((performance.now() - t0) / 1000);
  };
}

/** A surface of `nodes` tool/results (with their events), for prune and history benchmarks. */
function toolSurface(nodes: number): { events: SessionEvent[]; byseq: Map<number, SessionEvent> } {
  const engine = SessionEngine.create();
  const cands: CandidateEvent[] = [];
  for (let i = 0; i < nodes; i++) cands.push({ type: 'tool/result', data: toolData(i, 'x'.repeat(64)), surfaceOp: 'append' });
  const plan = engine.plan(cands, ctxFor(() => undefined));
  const byseq = new Map<number, SessionEvent>();
  for (const e of plan.events) byseq.set(e.seq, e);
  return { events: [...plan.events], byseq };
}

function pruneCandidate(target: SessionEvent): CandidateEvent {
  const d = target.data as { turn: number; step: number; message: { content: { content: unknown }[] } };
  const block = d.message.content[0] as Record<string, unknown>;
  return {
    type: 'tool/result',
    data: { ...d, message: { ...d.message, content: [{ ...block, content: [{ type: 'text', text: 'xx…xx' }] }] } },
    surfaceOp: { op: 'replace', start: target.seq, end: target.seq },
    sourceEventSeqs: [target.seq],
  };
}

/**
 * Prunes PRUNES tool/results of a surface of `nodes`, one event per plan/commit; prunes/s. Targets
 * walk the surface positions with a stride (7919), so a small surface gets pruned repeatedly
 * (prune chains, as the reference allows) and both sizes time the same number of prunes.
 */
function pruneThroughput(nodes: number, naive: boolean): Stat {
  const { events, byseq } = toolSurface(nodes);
  const rows: StructuralRow[] = events.map((e) => ({ seq: e.seq, type: e.type, surfaceOp: 'append' }));
  const mirror = events.map((e) => e.seq);
  const cands: CandidateEvent[] = [];
  for (let k = 0; k < PRUNES; k++) {
    const pos = (k * 7919) % nodes;
    const original = byseq.get(pos) as SessionEvent;
    cands.push(pruneCandidate({ ...original, seq: mirror[pos] as number }));
    mirror[pos] = nodes + k;
  }
  return runs(() => {
    const local = new Map(byseq);
    const lookup = (s: number): SessionEvent | undefined => local.get(s);
    if (naive) {
      const e = new NaiveEngine();
      e.load(rows);
      gc();
      const t0 = performance.now();
      for (const c of cands) {
        const ev = e.append(c, lookup);
        local.set(ev.seq, ev);
      }
      return PRUNES / ((performance.now() - t0) / 1000);
    }
    const e = SessionEngine.create();
    e.loadStructural(rows);
    const ctx = ctxFor(lookup);
    const one: CandidateEvent[] = [cands[0] as CandidateEvent];
    gc();
    const t0 = performance.now();
    for (const c of cands) {
      one[0] = c;
      const plan = e.plan(one, ctx);
      e.commit(plan);
      local.set((plan.events[0] as SessionEvent).seq, plan.events[0] as SessionEvent);
    }
    return PRUNES / ((performance.now() - t0) / 1000);
  });
}

/** Time (ms) of "prune one tool/result, then read the model history" at `nodes` surface nodes. */
function historyAfterReplace(nodes: number, naive: boolean): Stat {
  const { events, byseq } = toolSurface(nodes);
  const rows: StructuralRow[] = events.map((e) => ({ seq: e.seq, type: e.type, surfaceOp: 'append' }));
  const lookup = (s: number): SessionEvent | undefined => byseq.get(s);
  return runs(() => {
    const local = new Map(byseq);
    const look = (s: number): SessionEvent | undefined => local.get(s);
    let total = 0;
    if (naive) {
      const e = new NaiveEngine();
      e.load(rows);
      e.messages(lookup);
      for (let r = 0; r < HISTORY_READS; r++) {
        const target = local.get(e.surface[(r * 7919) % e.surface.length] as number) as SessionEvent;
        const t0 = performance.now();
        const ev = e.append(pruneCandidate(target), look);
        local.set(ev.seq, ev);
        const h = e.messages(look);
        total += performance.now() - t0;
        if (h.length !== nodes) throw new Error('naive history length');
      }
      return total / HISTORY_READS;
    }
    const e = SessionEngine.create();
    e.loadStructural(rows);
    const p = new MessageProjection('s');
    p.hydrate(events, e.nextSeq);
    p.history();
    const ctx = ctxFor(look);
    for (let r = 0; r < HISTORY_READS; r++) {
      const surf = p.surface();
      const target = local.get(surf[(r * 7919) % surf.length] as number) as SessionEvent;
      const t0 = performance.now();
      const plan = e.plan([pruneCandidate(target)], ctx);
      e.commit(plan);
      p.apply(plan);
      const h = p.history();
      total += performance.now() - t0;
      for (const ev of plan.events) local.set(ev.seq, ev);
      if (h.length !== nodes) throw new Error('history length');
    }
    return total / HISTORY_READS;
  });
}

/** Cold open: loadStructural of 1M rows, ms. */
function coldLoad(n: number): Stat {
  const rows = structuralRows(n);
  return runs(() => {
    const e = SessionEngine.create();
    const t0 = performance.now();
    e.loadStructural(rows);
    return performance.now() - t0;
  });
}

// ---------------------------------------------------------------- report

const fmtRate = (s: Stat): string => `${Math.round(s.median).toLocaleString('en-US')} (${Math.round(s.min).toLocaleString('en-US')}–${Math.round(s.max).toLocaleString('en-US')})`;
const fmtMs = (s: Stat): string => `${s.median.toFixed(3)} (${s.min.toFixed(3)}–${s.max.toFixed(3)})`;

const rows: string[][] = [];
const [a1k, a1m, n1k, n1m] = interleaved([appendRun(1_000, false), appendRun(1_000_000, false), appendRun(1_000, true), appendRun(1_000_000, true)]) as [Stat, Stat, Stat, Stat];
rows.push(['append, events/s, log of 1k', fmtRate(a1k), fmtRate(n1k)]);
rows.push(['append, events/s, log of 1M', fmtRate(a1m), fmtRate(n1m)]);
rows.push(['append cost ratio 1M / 1k (<= 1.2 wanted)', (a1k.median / a1m.median).toFixed(2), (n1k.median / n1m.median).toFixed(2)]);
rows.push(['tool-result prune, prunes/s, 1k surface nodes', fmtRate(pruneThroughput(1_000, false)), fmtRate(pruneThroughput(1_000, true))]);
rows.push(['tool-result prune, prunes/s, 100k surface nodes', fmtRate(pruneThroughput(100_000, false)), fmtRate(pruneThroughput(100_000, true))]);
rows.push(['prune + model history read, ms, 100k nodes', fmtMs(historyAfterReplace(100_000, false)), fmtMs(historyAfterReplace(100_000, true))]);
rows.push(['cold open loadStructural, ms, 1M rows', fmtMs(coldLoad(1_000_000)), '–']);

console.log(`Engine (in-process), node ${process.version}, ${RUNS} runs, median (min–max)${quick ? ', --quick' : ''}\n`);
console.log('| operation | SessionEngine (chunked) | naive reference-style |');
console.log('|---|---|---|');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
