/**
 * Issue #34 item 4: a session's token counts. `surfaceTokens` is the model history's size now by
 * the one estimator (src/domain/token-estimate.ts, the reference's token-meter estimate.ts
 * `estimateMessage`), and `usage` sums the usage recorded in assistant/message events (the
 * reference's TokenUsage keys inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens, as
 * its token-meter usage-projection.ts `bucketsFrom` reads them).
 */
import { describe, expect, it } from 'vitest';
import { SessionService, ANONYMOUS } from '../../src/app/session-service.js';
import { CompactionService } from '../../src/app/compaction.js';
import { sessionTokens } from '../../src/app/session-tokens.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';
import { estimateMessageTokens } from '../../src/domain/token-estimate.js';
import { assistant, user } from '../support/engine-harness.js';

const ctx = ANONYMOUS;
const tokensOf = (text: string): number => estimateMessageTokens({ role: 'user', content: [{ type: 'text', text }] });

describe('sessionTokens', () => {
  it('an empty session is all zeros', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    await app.createSession(ctx, { id: 's' });
    expect(await sessionTokens(app, ctx, 's')).toEqual({ surfaceTokens: 0, usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 } });
  });

  it('sums the surface estimate and the usage of every assistant message, and follows appends and a compaction', async () => {
    const app = new SessionService(new MemorySessionStore(), undefined, () => 1);
    await app.createSession(ctx, { id: 's' });
    const big = 'q'.repeat(4000);
    await app.append(ctx, 's', [
      user(big),
      assistant('hello', { data: { turn: 1, step: 1, message: { id: 'a1', role: 'assistant', content: [{ type: 'text', text: 'hello' }], source: { kind: 'model', provider: 'p', model: 'm' } }, usage: { inputTokens: 100, outputTokens: 7, cacheReadTokens: 50, cacheWriteTokens: 3 } } }),
    ]);
    const first = await sessionTokens(app, ctx, 's');
    expect(first).toEqual({ surfaceTokens: tokensOf(big) + tokensOf('hello'), usage: { inputTokens: 100, outputTokens: 7, cacheReadTokens: 50, cacheWriteTokens: 3 } });
    // A second assistant message without cache fields adds its input and output.
    await app.append(ctx, 's', [user('more'), assistant('ok')]);
    const second = await sessionTokens(app, ctx, 's');
    expect(second.usage).toEqual({ inputTokens: 101, outputTokens: 8, cacheReadTokens: 50, cacheWriteTokens: 3 });
    expect(second.surfaceTokens).toBe(tokensOf(big) + tokensOf('hello') + tokensOf('more') + tokensOf('ok'));
    // A compaction shadows the first two nodes: the surface shrinks, usage (the log's) stays.
    const svc = new CompactionService(app);
    await svc.compact(ctx, 's', { start: 0, end: 1, expectedLastSeq: 3, summary: [{ type: 'text', text: 'sum' }], provider: 'p', model: 'm' });
    const third = await sessionTokens(app, ctx, 's');
    expect(third.usage).toEqual(second.usage);
    expect(third.surfaceTokens).toBeLessThan(second.surfaceTokens);
    const messages = (await app.getMessagesPage(ctx, 's', 'model', 0, '', undefined)).messages;
    expect(third.surfaceTokens).toBe(messages.reduce((a, m) => a + estimateMessageTokens(m.message), 0));
  });

  it('a fresh service over the same store gives the same answer (nothing depends on the cache)', async () => {
    const store = new MemorySessionStore();
    const app = new SessionService(store, undefined, () => 1);
    await app.createSession(ctx, { id: 's' });
    await app.append(ctx, 's', [user('x'), assistant('y'), assistant('z')]);
    expect(await sessionTokens(new SessionService(store, undefined, () => 1), ctx, 's')).toEqual(await sessionTokens(app, ctx, 's'));
    expect((await sessionTokens(app, ctx, 's')).usage).toEqual({ inputTokens: 2, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0 });
  });
});
