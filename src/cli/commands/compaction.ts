/**
 * Provider-safe surface commands (issue #14): plan-compaction, compact, prune. The server plans
 * and writes the reference's events; these commands only pass the budget and print the answer
 * (`--json` uses the proto's JSON field names).
 */
import { readFileSync } from 'node:fs';
import { UsageError, parseInteger } from '../args.js';
import type { Command, CommandContext } from '../command.js';
import { PruneToolResultsRequest_Marker, type PlanCompactionRequest, type PlanCompactionResponse } from '../../../gen/palimpsest/v1/service.js';
import { EXIT } from '../client.js';

/** The default budget: the reference's retainTokens of 20,000. */
const DEFAULT_RETAIN_TOKENS = 20_000;

function budgetOf(ctx: CommandContext): PlanCompactionRequest['budget'] {
  const up = ctx.args.int('up-to-seq');
  const retain = ctx.args.int('retain-tokens');
  const keep = ctx.args.int('keep-tokens');
  if ([up, retain, keep].filter((x) => x !== undefined).length > 1) throw new UsageError('pass at most one of --retain-tokens N, --keep-tokens N or --up-to-seq SEQ');
  if (up !== undefined) return { $case: 'upToSeq', value: up };
  if (keep !== undefined) return { $case: 'keepTokens', value: keep };
  return { $case: 'retainTokens', value: retain ?? DEFAULT_RETAIN_TOKENS };
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
  'retain-tokens': { type: 'string', value: 'N', help: 'keep the shortest recent tail of at least N tokens, as the reference does (default 20000)' },
  'keep-tokens': { type: 'string', value: 'N', help: "keep the longest recent tail of at most N tokens (Palimpsest's budget, not the reference's)" },
  'up-to-seq': { type: 'string', value: 'SEQ', help: 'shadow from the start of the surface up to this surface seq instead' },
} as const;

const planCompaction: Command = {
  name: 'plan-compaction',
  summary: 'Plans a compaction (read-only): the range to shadow, never splitting a tool call from its result.',
  details: 'Prints start, end, shadowedSeqs, expectedLastSeq, shadowedTokenCount and blockers (an open compaction/start,\n' +
    'a tool result without a matching call, tool calls waiting for a result with nothing before them to compact).\n' +
    "Tokens: the reference token meter's estimate, per content block (see PlanCompaction).",
  positionals: [{ name: 'SESSION' }],
  options: { ...budgetOptions },
  examples: ['palimpsest plan-compaction demo --retain-tokens 8000 --json'],
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
    'with COMPACTION_BLOCKED while a compaction is open, a tool result has no matching call, or the range would end inside an\n' +
    'open tool round. A summary not smaller than the range is refused as the reference refuses it (compaction/start and\n' +
    'compaction/end {error} are written; exit 1). With --json prints\n' +
    '{"seqs","compactionId","surfaceLength","shadowedTokenCount","shadowedSeqs","error"?}.',
  positionals: [{ name: 'SESSION' }],
  options: {
    summary: { type: 'string', value: 'TEXT', help: 'the summary text' },
    'summary-file': { type: 'string', value: 'FILE', help: 'read the summary text from FILE (- = stdin)' },
    ...budgetOptions,
    provider: { type: 'string', value: 'P', help: 'provider that produced the summary (default "client")' },
    model: { type: 'string', value: 'M', help: 'model that produced the summary (default "unknown")' },
    'idempotency-key': { type: 'string', value: 'K', help: 'a retry with the same key returns the first result' },
    'source-command-id': { type: 'string', value: 'ID', help: 'the command that asked for the compaction (sourceCommandId)' },
  },
  examples: ['palimpsest compact demo --summary "User wants X; we did Y." --retain-tokens 4000 --provider openai --model gpt-4.1'],
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
      sourceCommandId: args.str('source-command-id') ?? '',
    });
    if (res.error !== undefined) {
      if (out.json) await out.printJson({ seqs: res.seqs, compactionId: res.compactionId, surfaceLength: res.surfaceLength, shadowedTokenCount: res.shadowedTokenCount, shadowedSeqs: p.shadowedSeqs, error: res.error });
      else await out.write(`not compacted: ${res.error}; compaction/start and compaction/end at seqs ${res.seqs.join(', ')}; write a shorter summary or compact a longer range\n`);
      return EXIT.REJECTED;
    }
    if (out.json) await out.printJson({ seqs: res.seqs, compactionId: res.compactionId, surfaceLength: res.surfaceLength, shadowedTokenCount: res.shadowedTokenCount, shadowedSeqs: p.shadowedSeqs });
    else await out.write(`compacted seqs ${p.start}..${p.end} (${p.shadowedSeqs.length} node(s), ~${res.shadowedTokenCount} tokens) into seq ${res.seqs[2]}; surface length ${res.surfaceLength}${res.replayed ? ' (replayed)' : ''}\n`);
  },
};

const prune: Command = {
  name: 'prune',
  summary: 'Prunes tool results on the surface (keeps head and tail around a marker), as the reference pruner does.',
  details: 'Either --seq N (repeatable), or --min-chars N and/or --min-bytes N [--keep-recent K] [--exclude-tool NAME]...\n' +
    'A result is pruned when its text is over the threshold in code points (--min-chars, else head + marker + tail), with\n' +
    "the reference's marker; --marker with-count and --min-saving-chars are Palimpsest's options. With --json prints\n" +
    '{"pruned":[{originalSeq,pruneSeq,replacementSeq,callId,bytesBefore,bytesAfter}],"bytesSaved","skipped"}.',
  positionals: [{ name: 'SESSION' }],
  options: {
    seq: { type: 'string', multiple: true, value: 'N', help: 'a surface tool/result seq to prune (repeatable)' },
    'min-chars': { type: 'string', value: 'N', help: "prune results whose text is over N code points (the reference's thresholdChars)" },
    'min-bytes': { type: 'string', value: 'N', help: 'prune results whose text is over N UTF-8 bytes' },
    'keep-recent': { type: 'string', value: 'K', help: 'with --min-bytes: leave the K most recent results alone' },
    'exclude-tool': { type: 'string', multiple: true, value: 'NAME', help: 'with --min-bytes: leave results of this tool alone (repeatable)' },
    'head-chars': { type: 'string', value: 'N', help: 'characters kept at the start (default 4096)' },
    'tail-chars': { type: 'string', value: 'N', help: 'characters kept at the end (default 1024)' },
    marker: { type: 'string', value: 'KIND', help: "reference (default: the reference's fixed marker) or with-count (names the removed count)" },
    'min-saving-chars': { type: 'string', value: 'N', help: 'skip a prune that removes fewer than N code points' },
  },
  examples: ['palimpsest prune demo --min-bytes 8192 --keep-recent 2', 'palimpsest prune demo --seq 41 --seq 57 --json'],
  async run({ args, rpc, out }) {
    const seqs = args.list('seq').map((s) => parseInteger('--seq', s));
    const minBytes = args.int('min-bytes', 1);
    const minChars = args.int('min-chars', 1);
    if ((seqs.length > 0) === (minBytes !== undefined || minChars !== undefined)) throw new UsageError('pass either --seq N (repeatable) or --min-chars N / --min-bytes N');
    const markerName = args.str('marker') ?? 'reference';
    if (markerName !== 'reference' && markerName !== 'with-count') throw new UsageError(`--marker is reference or with-count, not ${JSON.stringify(markerName)}`);
    const res = await rpc.unary(rpc.client.pruneToolResults, {
      sessionId: args.pos(0), seqs, minBytes: minBytes ?? 0, keepRecent: args.int('keep-recent') ?? 0, excludeTools: args.list('exclude-tool'),
      headChars: args.int('head-chars'), tailChars: args.int('tail-chars'), expectedLastSeq: undefined, idempotencyKey: '',
      minChars: minChars ?? 0, marker: markerName === 'with-count' ? PruneToolResultsRequest_Marker.MARKER_WITH_COUNT : PruneToolResultsRequest_Marker.MARKER_UNSPECIFIED,
      minSavingChars: args.int('min-saving-chars'),
    });
    if (out.json) await out.printJson({ pruned: res.pruned, bytesSaved: res.bytesSaved, skipped: res.skipped, surfaceLength: res.surfaceLength });
    else if (res.pruned.length === 0) await out.write(`nothing pruned${res.skipped.length > 0 ? ` (too short: ${res.skipped.join(', ')})` : ''}\n`);
    else await out.write(res.pruned.map((p) => `pruned seq ${p.originalSeq} (${p.callId}): ${p.bytesBefore} -> ${p.bytesAfter} bytes, copy at seq ${p.replacementSeq}`).join('\n') + `\nsaved ${res.bytesSaved} bytes\n`);
  },
};

/** The compaction commands, in help order. */
export const COMPACTION_COMMANDS: readonly Command[] = [planCompaction, compact, prune];
