/**
 * Provider-safe surfaces (issue #14): PlanCompaction on a 100k-node surface (target < 20 ms) and
 * GetSurface as_of_seq on a 1M-event SQLite session (target < 500 ms), at the app layer (the
 * use cases the gRPC handlers call; the wire encoding of a 100k-message plan is not included).
 *
 *   node --import tsx bench/provider.bench.ts [--quick]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SessionEvent } from '../src/domain/event.js';
import { ANONYMOUS, SessionService } from '../src/app/session-service.js';
import { CompactionService } from '../src/app/compaction.js';
import { MemorySessionStore } from '../src/store/memory/memory-store.js';
import { SqliteSessionStore } from '../src/store/sqlite/sqlite-store.js';
import { planCompaction, type PlanNode } from '../src/domain/compaction-plan.js';
import { estimateMessageTokens } from '../src/domain/token-estimate.js';
import { pairingInfoOfMessage } from '../src/domain/tool-pairing.js';
import { PROVIDER_FORMATS, renderHistory, type ProviderFormat } from '../src/domain/render/index.js';
import { messageJsonText } from '../src/domain/derive.js';
import type { MessageJson } from '../src/domain/message-view.js';

const quick = process.argv.includes('--quick');
/** `--render-only`: only the provider rendering rows (issue #34). */
const renderOnly = process.argv.includes('--render-only');
const RUNS = quick ? 5 : 21;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

interface Timing {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** Median CPU time (user + system) of the process over the call. */
  readonly cpu: number;
}

async function time(fn: () => Promise<unknown> | unknown, runs = RUNS): Promise<Timing> {
  const xs: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < runs; i++) {
    const c = process.cpuUsage();
    const t = performance.now();
    await fn();
    xs.push(performance.now() - t);
    const d = process.cpuUsage(c);
    cpu.push((d.user + d.system) / 1000);
  }
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), cpu: median(cpu) };
}

const fmt = (t: Timing): string => `${t.median.toFixed(1)} ms (${t.min.toFixed(1)}–${t.max.toFixed(1)}); CPU ${t.cpu.toFixed(1)} ms`;

/**
 * A realistic agent log: per round a user message, `chunks` assistant chunks, an assistant
 * message with one tool call, the tool/call, its tool/result, a final assistant message; every
 * `compactEvery` rounds a compaction (start, summary, replacing user message, end) of the oldest
 * rounds, and some prunes (compaction/prune + tool/result copy).
 */
function agentLog(targetEvents: number, chunks: number, compactEvery: number): SessionEvent[] {
  const out: SessionEvent[] = [];
  const surface: number[] = [];
  let seq = 0;
  const push = (e: Omit<SessionEvent, 'seq' | 'time'>): number => {
    const ev = { ...e, seq, time: 1_700_000_000_000 + seq } as SessionEvent;
    out.push(ev);
    if (ev.surfaceOp === 'append') surface.push(seq);
    return seq++;
  };
  let round = 0;
  while (seq < targetEvents) {
    round++;
    push({ type: 'user/message', data: { id: `u${round}`, role: 'user', content: [{ type: 'text', text: `question ${round} `.repeat(8) }], source: { kind: 'user' } }, surfaceOp: 'append' });
    const firstChunk = seq;
    for (let c = 0; c < chunks; c++) push({ type: 'assistant/chunk', data: { turn: round, step: 1, chunk: { type: 'text-delta', index: 0, text: 'tok ' } } });
    const cites = Array.from({ length: chunks }, (_, i) => firstChunk + i);
    const callId = `call-${round}`;
    push({ type: 'assistant/message', data: { turn: round, step: 1, message: { id: `a${round}`, role: 'assistant', content: [{ type: 'text', text: 'let me look' }, { type: 'tool-call', id: callId, name: 'read', arguments: '{"path":"src/x.ts"}' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, sourceEventSeqs: cites, surfaceOp: 'append' });
    const callSeq = push({ type: 'tool/call', data: { turn: round, step: 1, callId, name: 'read', arguments: '{"path":"src/x.ts"}' } });
    push({ type: 'tool/result', data: { turn: round, step: 1, message: { id: `r${round}`, role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', toolCallId: callId, content: [{ type: 'text', text: 'line of output\n'.repeat(20) }] }] } }, sourceEventSeqs: [callSeq], surfaceOp: 'append' });
    push({ type: 'assistant/message', data: { turn: round, step: 2, message: { id: `b${round}`, role: 'assistant', content: [{ type: 'text', text: 'done' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, sourceEventSeqs: [], surfaceOp: 'append' });
    if (compactEvery > 0 && round % compactEvery === 0 && surface.length > 10) {
      const shadowed = surface.splice(0, Math.floor(surface.length / 2));
      const start = push({ type: 'compaction/start', data: { compactionId: `c${round}`, turn: null } });
      const sum = push({ type: 'compaction/summary', data: { compactionId: `c${round}`, summary: [{ type: 'text', text: 's' }], shadowedRange: { start: shadowed[0] as number, end: shadowed[shadowed.length - 1] as number }, shadowedSeqs: shadowed, shadowedTokenCount: 1, provider: 'p', model: 'm' } });
      const rep = push({ type: 'user/message', data: { id: `s${round}`, role: 'user', content: [{ type: 'text', text: 'summary' }], source: { kind: 'plugin', plugin: 'compact', compactionId: `c${round}` } }, sourceEventSeqs: [start, sum, ...shadowed], surfaceOp: { op: 'replace', start: shadowed[0] as number, end: shadowed[shadowed.length - 1] as number } });
      surface.unshift(rep);
      push({ type: 'compaction/end', data: { compactionId: `c${round}`, turn: null } });
    }
  }
  return out;
}

/** A 100k-node surface: rounds of user, assistant(call), tool/result, assistant; no replaces. */
function wideLog(nodes: number): SessionEvent[] {
  return agentLog(Math.ceil(nodes / 4) * 5, 0, 0);
}

const rows: string[][] = [];

// ---- PlanCompaction on a 100k-node surface --------------------------------------------------
if (!renderOnly) {
  const nodes = quick ? 20_000 : 100_000;
  const store = new MemorySessionStore();
  const app = new SessionService(store);
  const log = wideLog(nodes);
  await store.createSession({ header: { version: 0, id: 'wide', createdAt: 1 }, labels: {}, tenant: '', strict: false, pairingGuard: true, writer: 'w0' }, log);
  const svc = new CompactionService(app);
  const surface = (await app.getSurface(ANONYMOUS, 'wide')).seqs.length;
  const coldStart = performance.now();
  const first = await svc.plan(ANONYMOUS, 'wide', { keepTokens: 20_000 });
  const cold = performance.now() - coldStart;
  const warm = await time(() => svc.plan(ANONYMOUS, 'wide', { keepTokens: 20_000 }));
  // The pure planner alone, on prepared nodes.
  const snap = await app.modelSnapshot(ANONYMOUS, 'wide', { surface: true });
  const byseq = new Map(snap.messages.map((m) => [m.seq, m.message] as const));
  const planNodes: PlanNode[] = (snap.surface as number[]).map((seq) => {
    const m = byseq.get(seq) as never;
    return { seq, tokens: estimateMessageTokens(m), pairing: pairingInfoOfMessage(m) };
  });
  const pure = await time(() => planCompaction(planNodes, { keepTokens: 20_000 }));
  rows.push([`PlanCompaction (app), ${surface.toLocaleString('en')}-node surface, warm (model history cached)`, fmt(warm)]);
  rows.push([`PlanCompaction (app), first call (hydrates the projection from the store)`, `${cold.toFixed(0)} ms`]);
  rows.push([`planCompaction (domain only), ${surface.toLocaleString('en')} nodes`, fmt(pure)]);
  rows.push([`  plan: shadows ${first.shadowedSeqs.length.toLocaleString('en')} nodes, keeps ~${first.keptTokenCount} tokens`, '']);
  // PruneToolResults of one result on the same guarded session: the guard walks the surface once
  // before and once after (the first prune also hydrates its index from the surface data).
  const results = (await app.getSurface(ANONYMOUS, 'wide')).seqs.filter((_, i) => i % 4 === 2);
  const firstPruneStart = performance.now();
  await svc.prune(ANONYMOUS, 'wide', { seqs: [results[0] as number], headChars: 10, tailChars: 10 });
  const firstPrune = performance.now() - firstPruneStart;
  let k = 1;
  const prune = await time(() => svc.prune(ANONYMOUS, 'wide', { seqs: [results[k++] as number], headChars: 10, tailChars: 10 }));
  rows.push([`PruneToolResults, one result, same session (tool-pairing guard on)`, fmt(prune)]);
  rows.push([`PruneToolResults, first call (hydrates the guard's index from the surface data)`, `${firstPrune.toFixed(0)} ms`]);
  const met = warm.median < 20;
  console.log(`HEADLINE ${JSON.stringify({ id: 'plan-compaction', label: `PlanCompaction on a ${surface.toLocaleString('en')}-node surface (app layer, warm)`, value: `${warm.median.toFixed(1)} ms (CPU ${warm.cpu.toFixed(1)} ms)`, target: '< 20 ms', met: quick ? undefined : met })}`);
}

// ---- GetSurface as_of_seq on a 1M-event SQLite session ---------------------------------------
if (!renderOnly) {
  const events = quick ? 200_000 : 1_000_000;
  const dir = mkdtempSync(join(tmpdir(), 'pali-bench-provider-'));
  try {
    const store = new SqliteSessionStore({ path: join(dir, 'db.sqlite'), durability: 'normal' });
    const log = agentLog(events, 20, 40);
    const buildStart = performance.now();
    await store.createSession({ header: { version: 0, id: 'big', createdAt: 1 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, log);
    const build = performance.now() - buildStart;
    const app = new SessionService(store);
    const head = (log[log.length - 1] as SessionEvent).seq;
    const replaces = log.filter((e) => typeof e.surfaceOp === 'object').length;
    const atHead = await time(() => app.getSurface(ANONYMOUS, 'big', head));
    const atMid = await time(() => app.getSurface(ANONYMOUS, 'big', Math.floor(head / 2)));
    const msgs = await time(() => app.getMessages(ANONYMOUS, 'big', 'model', { asOfSeq: head }), Math.min(RUNS, 5));
    rows.push([`GetSurface as_of_seq = head, ${log.length.toLocaleString('en')} events (${replaces} compactions), SQLite`, fmt(atHead)]);
    rows.push([`GetSurface as_of_seq = head / 2`, fmt(atMid)]);
    rows.push([`GetMessages (model history) as_of_seq = head (replay + data of the surviving events)`, fmt(msgs)]);
    rows.push([`  (building the session: ${(build / 1000).toFixed(1)} s)`, '']);
    console.log(`HEADLINE ${JSON.stringify({ id: 'as-of-seq', label: `GetSurface as_of_seq on a ${log.length.toLocaleString('en')}-event session (SQLite, app layer)`, value: `${atHead.median.toFixed(0)} ms (CPU ${atHead.cpu.toFixed(0)} ms)`, target: '< 500 ms', met: quick ? undefined : atHead.median < 500 })}`);
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The model history in a provider's format (issue #34): GetMessages of a 10k-event agent log
// (one compaction, some prunes) per format vs the DSH shape, at the app layer plus each message's
// JSON text (what the handler puts on the wire; cached per message object on both paths). Warm:
// repeated reads of an unchanged session (the projection and the last rendering are reused).
// Fresh: the rendering alone with nothing reused. The loop: append a turn, then read (the last
// rendering is extended from the cut, domain/render/incremental.ts renderAppended). The DSH and
// the format reads alternate call by call, so a loaded machine slows both alike; the ratio is of
// their medians.
{
  const log = agentLog(10_000, 8, 1_000);
  const store = new MemorySessionStore();
  await store.createSession({ header: { version: 0, id: 'render', createdAt: 1 }, labels: {}, tenant: '', strict: false, pairingGuard: false, writer: 'w0' }, log);
  const app = new SessionService(store);
  const dshRead = async (): Promise<number> => {
    let bytes = 0;
    for (const m of (await app.getMessagesPage(ANONYMOUS, 'render', 'model', 0, '')).messages) bytes += messageJsonText(m.message).length;
    return bytes;
  };
  const formatRead = (format: ProviderFormat) => async (): Promise<number> => {
    let bytes = 0;
    for (const m of (await app.getRenderedMessagesPage(ANONYMOUS, 'render', { format, pageSize: 0, pageToken: '' })).messages) bytes += messageJsonText(m.json).length;
    return bytes;
  };
  /** Medians of `a` and `b` called alternately, RUNS times each. */
  const paired = async (a: () => Promise<unknown>, b: () => Promise<unknown>): Promise<[Timing, Timing]> => {
    const xs: number[] = [];
    const ys: number[] = [];
    const cx: number[] = [];
    const cy: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      for (const [fn, ts, cs] of [[a, xs, cx], [b, ys, cy]] as const) {
        const c = process.cpuUsage();
        const t = performance.now();
        await fn();
        ts.push(performance.now() - t);
        const d = process.cpuUsage(c);
        cs.push((d.user + d.system) / 1000);
      }
    }
    const timing = (ts: number[], cs: number[]): Timing => ({ median: median(ts), min: Math.min(...ts), max: Math.max(...ts), cpu: median(cs) });
    return [timing(xs, cx), timing(ys, cy)];
  };
  const ms = (t: Timing): string => `${t.median.toFixed(3)} ms`;
  await dshRead();
  const entries = (await app.getMessages(ANONYMOUS, 'render', 'model')).messages.map((m) => ({ seq: m.seq, message: m.message as MessageJson }));
  rows.push([`GetMessages, ${log.length.toLocaleString('en')}-event log (${entries.length.toLocaleString('en')} messages): DSH \| format (ratio)`, '']);
  let worstWarm = 0;
  let worstLoop = 0;
  for (const format of PROVIDER_FORMATS) {
    await formatRead(format)();
    const [dshWarm, warm] = await paired(dshRead, formatRead(format));
    const fresh = await time(() => {
      let bytes = 0;
      for (const m of renderHistory(format, entries)) bytes += JSON.stringify(m.json).length;
      return bytes;
    });
    // The agent's loop: append a turn, read the history to send.
    let turn = 0;
    const appendTurn = (): Promise<unknown> => app.append(ANONYMOUS, 'render', [
      { type: 'user/message', data: { id: `bu${format}${++turn}`, role: 'user', content: [{ type: 'text', text: 'next?' }], source: { kind: 'user' } }, surfaceOp: 'append' },
      { type: 'assistant/message', data: { turn: 1, step: 1, message: { id: `ba${format}${turn}`, role: 'assistant', content: [{ type: 'text', text: 'ok' }], source: { kind: 'model', provider: 'p', model: 'm' } } }, surfaceOp: 'append', sourceEventSeqs: [] },
    ]);
    const [dshLoop, loop] = await paired(async () => { await appendTurn(); return dshRead(); }, async () => { await appendTurn(); return formatRead(format)(); });
    worstWarm = Math.max(worstWarm, warm.median / dshWarm.median);
    worstLoop = Math.max(worstLoop, loop.median / dshLoop.median);
    rows.push([`${format}: warm (unchanged session)`, `${ms(dshWarm)} \| ${ms(warm)} (${(warm.median / dshWarm.median).toFixed(2)}x)`]);
    rows.push([`${format}: append a turn, then GetMessages`, `${ms(dshLoop)} \| ${ms(loop)} (${(loop.median / dshLoop.median).toFixed(2)}x)`]);
    rows.push([`${format}: rendering afresh + JSON text (no reuse)`, `${fmt(fresh)}`]);
  }
  console.log(`HEADLINE ${JSON.stringify({ id: 'render-formats', label: `GetMessages in a provider format, ${log.length.toLocaleString('en')}-event log (app layer + JSON text, warm), worst format vs DSH`, value: `${worstWarm.toFixed(2)}x`, target: '< 2x the DSH shape', met: quick ? undefined : worstWarm < 2 })}`);
  console.log(`HEADLINE ${JSON.stringify({ id: 'render-formats-append', label: `Append a turn then GetMessages in a provider format, ${log.length.toLocaleString('en')}-event log (app layer + JSON text), worst format vs DSH`, value: `${worstLoop.toFixed(2)}x`, target: '< 2x the DSH shape', met: quick ? undefined : worstLoop < 2 })}`);
}

console.log(`Provider-safe surfaces (app layer), node ${process.version}, median of ${RUNS} (min–max)${quick ? ', --quick' : ''}\n`);
console.log('| operation | time |');
console.log('|---|---|');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
