/**
 * Blob reads racing a session's first blob (issue #39): the BlobbingStore reads first and checks
 * for blobs after, so a client that did not ask for blob_refs never gets a raw `{"$blob": …}`.
 * The interleavings are forced with a store double whose reads run a hook (the concurrent
 * append) at the worst moment.
 */
import { describe, expect, it } from 'vitest';
import { SessionService, ANONYMOUS, DEFAULT_LIMITS } from '../../src/app/session-service.js';
import { BlobbingStore } from '../../src/app/blobbing-store.js';
import type { EncodedEventPage } from '../../src/app/ports/capabilities.js';
import type { ReadEventsQuery } from '../../src/app/store-port.js';
import type { SessionEvent } from '../../src/domain/event.js';
import { MemorySessionStore } from '../../src/store/memory/memory-store.js';

const BIG = 'x'.repeat(70_000);

/** A memory store with an encoded page read that first runs `beforePage` (the racing append). */
class PagedStore extends MemorySessionStore {
  beforePage: (() => Promise<void>) | undefined;
  readonly eventPageFormat = 1;
  async readEncodedEventPage(sessionId: string, query: ReadEventsQuery): Promise<EncodedEventPage | undefined> {
    const hook = this.beforePage;
    this.beforePage = undefined;
    if (hook !== undefined) await hook();
    const rows = await this.readEventTexts(sessionId, query);
    return {
      bytes: Buffer.from(rows.map((r) => r.dataText).join('\n')), count: rows.length, nextSeq: undefined,
      firstSeq: rows[0]?.seq, lastSeq: rows.at(-1)?.seq,
    };
  }
}

async function session(inner: MemorySessionStore): Promise<{ store: BlobbingStore; append: (text: string) => Promise<unknown> }> {
  const store = new BlobbingStore(inner, 65_536);
  const service = new SessionService(store, DEFAULT_LIMITS, () => 1_700_000_000_000);
  await service.createSession(ANONYMOUS, { id: 's' });
  const append = (text: string) => service.append(ANONYMOUS, 's', [{ type: 'x/note', data: { text } }]);
  await append('small');
  return { store, append };
}

describe('blob reads racing the first blob of a session', () => {
  it('an encoded page read while the first blob is appended is dropped (rows are read instead), never served with the reference', async () => {
    const inner = new PagedStore();
    const { store, append } = await session(inner);
    const query: ReadEventsQuery = { fromSeq: 0, direction: 'forward', limit: 10 };
    // no blob: the page is served
    expect(await store.readEncodedEventPage!('s', query, 1 << 20)).toBeDefined();
    // the first blob commits after the check would have run and before the page is read
    inner.beforePage = async () => {
      await append(BIG);
    };
    expect(await store.readEncodedEventPage!('s', query, 1 << 20)).toBeUndefined();
    const rows = await store.readEventTexts('s', query);
    expect(rows.map((r) => r.dataText.includes('$blob'))).toEqual([false, false]);
  });

  it('a scan of a live session inflates the batches after its first blob', async () => {
    const { store, append } = await session(new MemorySessionStore());
    const seen: SessionEvent[] = [];
    for await (const batch of store.scanEvents('s', 0, 1)) {
      seen.push(...batch);
      if (seen.length === 1) await append(BIG);
    }
    expect(seen.map((e) => e.seq)).toEqual([0, 1]);
    expect(seen[1]!.data).toEqual({ text: BIG });
  });
});
