/**
 * Provider-safe surface commands (issue #14): plan-compaction, compact, prune. The server plans
 * and writes the reference's events; these commands only pass the budget and print the answer
 * (`--json` uses the proto's JSON field names).
 */
import { readFileSync } from 'node:fs';
import { UsageError, parseInteger } from '../args.js';
import type { Command, CommandContext } from '../command.js';
import type { PlanCompactionResponse } from '../../../gen/palimpsest/v1/service.js';

function budgetOf(ctx: CommandContext): { $case: 'keepTokens'; value: number } | { $case: 'upToSeq'; value: number } {
  const up = ctx.args.int('up-to-seq');
  if (up !== undefined) return { $case: 'upToSeq', value: up };
  return { $case: 'keepTokens', value: ctx.args.int('keep-tokens') ?? 20_000 };
}

function planJson(p: PlanCompactionResponse): Record<string, unknown> {
  return {
    start: p.start ?? null,
    end: p.end ?? null,
    shadowedSeqs: p.shadowedSeqs,
    expectedLastSeq: p.expectedLastSeq,
    shadowedTokenCount: p.shadowedTokenCount,
    keptTokenCount: p.keptTokenCount,
    blockers: p.blockers.map((b) => ({ reason: b.reason, description: b.description, seqs: b.seqs, callIds: b.callIds })),
  };
}

function planText(p: PlanCompactionResponse): string {
  const lines: string[] = [];
  if (p.start === undefined) lines.push('nothing to compact: the budget keeps the whole surface');
  else lines.push(`shadow ${p.shadowedSeqs.length} node(s), seqs ${p.start}..${p.end} (~${p.shadowedTokenCount} tokens); keep ~${p.keptTokenCount} tokens; expected last seq ${p.expectedLastSeq}`);
  for (const b of p.blockers) lines.push(`blocked: ${b.reason}: ${b.description}`);
  return lines.join('\n') + '\n';
}

const budgetOptions = {
  'keep-tokens': { type: 'string', value: 'N', help: 'keep the most recent N tokens of the surface (default 20000)' },
  'up-to-seq': { type: 'string', value: 'SEQ', help: 'shadow from the start of the surface up to this surface seq instead' },
} as const;

const planCompaction: Command = {
  name: 'plan-compaction',
  summary: 'Plans a compaction (read-only): the range to shadow, never splitting a tool call from its result.',
  details: 'Prints start, end, shadowedSeqs, expectedLastSeq, shadowedTokenCount and blockers (an open compaction/start,\ntool calls on the surface still waiting for a result). Tokens: ceil(characters / 4) + 8 per message (see PlanCompaction).',
  positionals: [{ name: 'SESSION' }],
  options: { ...budgetOptions },
  examples: ['palimpsest plan-compaction demo --keep-tokens 8000 --json'],
  async run(ctx) {
    const p = await ctx.rpc.unary(ctx.rpc.client.planCompaction, { sessionId: ctx.args.pos(0), budget: budgetOf(ctx), tokenCounts: {}, omitMessages: true });
    if (ctx.out.json) await ctx.out.printJson(planJson(p));
    else await ctx.out.write(planText(p));
  },
};

const compact: Command = {
  name: 'compact',
  summary: 'Plans and compacts in one go: appends the reference compaction events with your summary.',
  details:
    'Conditional on the head it planned against (HEAD_MISMATCH if the session moved meanwhile: run it again). Refuses\n' +
    'with COMPACTION_BLOCKED while a compaction is open or tool calls on the surface have no result. With --json prints\n' +
    '{"seqs","compactionId","surfaceLength","shadowedTokenCount","shadowedSeqs"}.',
  positionals: [{ name: 'SESSION' }],
  options: {
    summary: { type: 'string', value: 'TEXT', help: 'the summary text' },
    'summary-file': { type: 'string', value: 'FILE', help: 'read the summary text from FILE (- = stdin)' },
    ...budgetOptions,
    provider: { type: 'string', value: 'P', help: 'provider that produced the summary (default "client")' },
    model: { type: 'string', value: 'M', help: 'model that produced the summary (default "unknown")' },
    'idempotency-key': { type: 'string', value: 'K', help: 'a retry with the same key returns the first result' },
  },
  examples: ['palimpsest compact demo --summary "User wants X; we did Y." --keep-tokens 4000 --provider openai --model gpt-4.1'],
  async run(ctx) {
    const { args, rpc, out } = ctx;
    const text = args.str('summary');
    const file = args.str('summary-file');
    if ((text === undefined) === (file === undefined)) throw new UsageError('pass exactly one of --summary TEXT or --summary-file FILE');
    let summary: string;
    try {
      summary = text ?? readFileSync(file === '-' ? 0 : (file as string), 'utf8');
    } catch (e) {
      throw new UsageError(`cannot read ${file}: ${(e as Error).message}`);
    }
    const sessionId = args.pos(0);
    const p = await rpc.unary(rpc.client.planCompaction, { sessionId, budget: budgetOf(ctx), tokenCounts: {}, omitMessages: true });
    if (p.start === undefined || p.end === undefined) {
      if (out.json) await out.printJson({ seqs: [], ...planJson(p) });
      else await out.write(planText(p));
      return 0;
    }
    const res = await rpc.unary(rpc.client.compact, {
      sessionId, start: p.start, end: p.end, expectedLastSeq: p.expectedLastSeq, summary: { $case: 'summaryText', value: summary },
      provider: args.str('provider') ?? 'client', model: args.str('model') ?? 'unknown', idempotencyKey: args.str('idempotency-key') ?? '',
      usage: undefined, maxTokens: undefined, shadowedTokenCount: undefined, rawOutputJson: '', llmStreamCall: false,
    });
    if (out.json) await out.printJson({ seqs: res.seqs, compactionId: res.compactionId, surfaceLength: res.surfaceLength, shadowedTokenCount: res.shadowedTokenCount, shadowedSeqs: p.shadowedSeqs });
    else await out.write(`compacted seqs ${p.start}..${p.end} (${p.shadowedSeqs.length} node(s), ~${res.shadowedTokenCount} tokens) into seq ${res.seqs[2]}; surface length ${res.surfaceLength}${res.replayed ? ' (replayed)' : ''}\n`);
  },
};

const prune: Command = {
  name: 'prune',
  summary: 'Prunes tool results on the surface (keeps head and tail around a marker), as the reference pruner does.',
  details: 'Either --seq N (repeatable) or --min-bytes N [--keep-recent K] [--exclude-tool NAME]... With --json prints\n{"pruned":[{originalSeq,pruneSeq,replacementSeq,callId,bytesBefore,bytesAfter}],"bytesSaved","skipped"}.',
  positionals: [{ name: 'SESSION' }],
  options: {
    seq: { type: 'string', multiple: true, value: 'N', help: 'a surface tool/result seq to prune (repeatable)' },
    'min-bytes': { type: 'string', value: 'N', help: 'prune results whose text is over N bytes' },
    'keep-recent': { type: 'string', value: 'K', help: 'with --min-bytes: leave the K most recent results alone' },
    'exclude-tool': { type: 'string', multiple: true, value: 'NAME', help: 'with --min-bytes: leave results of this tool alone (repeatable)' },
    'head-chars': { type: 'string', value: 'N', help: 'characters kept at the start (default 4096)' },
    'tail-chars': { type: 'string', value: 'N', help: 'characters kept at the end (default 1024)' },
  },
  examples: ['palimpsest prune demo --min-bytes 8192 --keep-recent 2', 'palimpsest prune demo --seq 41 --seq 57 --json'],
  async run({ args, rpc, out }) {
    const seqs = args.list('seq').map((s) => parseInteger('--seq', s));
    const minBytes = args.int('min-bytes', 1);
    if ((seqs.length > 0) === (minBytes !== undefined)) throw new UsageError('pass either --seq N (repeatable) or --min-bytes N');
    const res = await rpc.unary(rpc.client.pruneToolResults, {
      sessionId: args.pos(0), seqs, minBytes: minBytes ?? 0, keepRecent: args.int('keep-recent') ?? 0, excludeTools: args.list('exclude-tool'),
      headChars: args.int('head-chars'), tailChars: args.int('tail-chars'), expectedLastSeq: undefined, idempotencyKey: '',
    });
    if (out.json) await out.printJson({ pruned: res.pruned, bytesSaved: res.bytesSaved, skipped: res.skipped, surfaceLength: res.surfaceLength });
    else if (res.pruned.length === 0) await out.write(`nothing pruned${res.skipped.length > 0 ? ` (too short: ${res.skipped.join(', ')})` : ''}\n`);
    else await out.write(res.pruned.map((p) => `pruned seq ${p.originalSeq} (${p.callId}): ${p.bytesBefore} -> ${p.bytesAfter} bytes, copy at seq ${p.replacementSeq}`).join('\n') + `\nsaved ${res.bytesSaved} bytes\n`);
  },
};

/** The compaction commands, in help order. */
export const COMPACTION_COMMANDS: readonly Command[] = [planCompaction, compact, prune];
