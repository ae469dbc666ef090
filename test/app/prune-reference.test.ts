/**
 * Issue #32 item 5: PruneToolResults follows the reference's tool-result pruner
 * (toninfo/deepseek-harness packages/compaction/compaction-tool-result-pruner/src/index.ts,
 * `pruneContent`, and config.ts `PRUNE_MARKER` / `resolveConfig`): the fixed marker, and a prune
 * whenever the text exceeds the threshold in code points. Palimpsest's marker naming the count and
 * the minimum saving are options.
 */
import { describe, expect, it } from 'vitest';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import { CompactionService } from '../../src/app/compaction.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { DomainError } from '../../src/domain/errors.js';
import type { CandidateEvent, SessionEvent } from '../../src/domain/event.js';
import { PRUNE_MARKER, pruneMarker } from '../../src/domain/prune.js';
import { toolResult, user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;

function call(callId: string): CandidateEvent {
  return {
    type: 'assistant/message',
    data: { turn: 1, step: 1, message: { id: `a-${callId}`, role: 'assistant', content: [{ type: 'tool-call', id: callId, name: 'read', arguments: '{}' }], source: { kind: 'model', provider: 'p', model: 'm' } } },
    surfaceOp: 'append',
  };
}

async function setup(texts: string[]): Promise<{ app: SessionService; svc: CompactionService }> {
  const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
  await app.createSession(ctx, { id: 'p' });
  const events: CandidateEvent[] = [user('go')];
  texts.forEach((t, i) => events.push(call(`c${i}`), toolResult(`c${i}`, t)));
  await app.append(ctx, 'p', events);
  return { app, svc: new CompactionService(app) };
}

async function innerText(app: SessionService, seq: number): Promise<string> {
  const out: SessionEvent[] = [];
  for await (const b of app.scan(ctx, 'p', seq)) out.push(...b);
  const d = out[0]!.data as { message: { content: { content: { text: string }[] }[] } };
  return d.message.content[0]!.content.map((b) => b.text).join('');
}

describe('the reference pruner is the default', () => {
  it('the marker is the fixed `\\n\\n[... tool result middle pruned ...]\\n\\n`', async () => {
    expect(PRUNE_MARKER).toBe('\n\n[... tool result middle pruned ...]\n\n');
    const text = 'h'.repeat(4096) + 'm'.repeat(10_000) + 't'.repeat(1024);
    const { app, svc } = await setup([text]);
    const res = await svc.prune(ctx, 'p', { seqs: [2] });
    expect(await innerText(app, res.pruned[0]!.replacementSeq)).toBe('h'.repeat(4096) + PRUNE_MARKER + 't'.repeat(1024));
  });

  it('prunes whenever the text exceeds the threshold in code points, even when it saves less than twice the marker', async () => {
    // min_chars = head + marker + tail, the smallest threshold the reference's resolveConfig accepts.
    const head = 10;
    const tail = 10;
    const threshold = head + Array.from(PRUNE_MARKER).length + tail;
    const over = 'é'.repeat(threshold + 1); // code points, not bytes: 2 bytes each
    const at = 'x'.repeat(threshold);
    const { app, svc } = await setup([over, at]);
    const res = await svc.prune(ctx, 'p', { minChars: threshold, headChars: head, tailChars: tail });
    expect(res.pruned.map((p) => p.originalSeq)).toEqual([2]);
    expect(await innerText(app, res.pruned[0]!.replacementSeq)).toBe('é'.repeat(head) + PRUNE_MARKER + 'é'.repeat(tail));
  });

  it('by seq without min_chars: the threshold is head + marker + tail (never a longer result)', async () => {
    const { svc } = await setup(['z'.repeat(4096 + 1024 + 39), 'z'.repeat(4096 + 1024 + 40)]);
    const res = await svc.prune(ctx, 'p', { seqs: [2, 4] });
    expect(Array.from(PRUNE_MARKER).length).toBe(39);
    expect(res.pruned.map((p) => p.originalSeq)).toEqual([4]);
    expect(res.skipped).toEqual([2]);
  });

  it('refuses min_chars below head + marker + tail (the reference refuses that config), log untouched', async () => {
    const { app, svc } = await setup(['z'.repeat(10_000)]);
    const err = await svc.prune(ctx, 'p', { minChars: 100, headChars: 50, tailChars: 50 }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).reason).toBe('INVALID_ARGUMENT');
    expect((err as DomainError).message).toMatch(/min_chars \(100\) must be at least head_chars \+ marker \+ tail_chars \(139\)/);
    expect((await app.getSession(ctx, 'p')).headSeq).toBe(2);
  });
});

describe("Palimpsest's choices are options", () => {
  it('marker = with-count names the removed characters', async () => {
    const text = 'h'.repeat(4096) + 'm'.repeat(10_000) + 't'.repeat(1024);
    const { app, svc } = await setup([text]);
    const res = await svc.prune(ctx, 'p', { seqs: [2], marker: 'with-count' });
    expect(await innerText(app, res.pruned[0]!.replacementSeq)).toBe('h'.repeat(4096) + pruneMarker(10_000) + 't'.repeat(1024));
  });

  it('min_saving_chars skips a prune that would remove fewer characters', async () => {
    const { svc } = await setup(['z'.repeat(4096 + 1024 + 100), 'z'.repeat(4096 + 1024 + 200)]);
    const res = await svc.prune(ctx, 'p', { seqs: [2, 4], minSavingChars: 150 });
    expect(res.pruned.map((p) => p.originalSeq)).toEqual([4]);
    expect(res.skipped).toEqual([2]);
  });
});
