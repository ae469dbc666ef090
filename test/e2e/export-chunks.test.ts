/**
 * ExportSession cuts its messages per line at ~256 KiB: it used to send one message per store
 * batch (up to 2000 events), so a session of large events became a multi-megabyte message that
 * a client with the default 4 MiB receive limit refused (RESOURCE_EXHAUSTED) — found while
 * testing token revocation on a long export.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExportSessionRequest } from '../../gen/palimpsest/v1/service.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { api, type Api } from '../support/e2e.js';
import { input } from '../support/events.js';

let t: TestServer;
let a: Api;
beforeAll(async () => {
  t = await startTestServer();
  a = api(t.client);
});
afterAll(async () => { await t?.stop(); });

describe('ExportSession message size', () => {
  it('a 9 MB session exports to a default client in messages of about 256 KiB', async () => {
    await a.createSession({ sessionId: 'big' });
    for (let b = 0; b < 3; b++) {
      await a.appendEvents({ sessionId: 'big', events: Array.from({ length: 30 }, (_, i) => input('x/y', { i, pad: 'p'.repeat(100_000) })) });
    }
    const sizes: number[] = [];
    const text = await new Promise<string>((resolve, reject) => {
      const parts: Buffer[] = [];
      const s = t.client.exportSession(ExportSessionRequest.fromPartial({ sessionId: 'big' }));
      s.on('data', (m: { chunk: Uint8Array }) => {
        sizes.push(m.chunk.length);
        parts.push(Buffer.from(m.chunk));
      });
      s.on('error', reject);
      s.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    });
    // Header, 90 events, and the metadata trailer (the pairing guard is on by default, issue #35).
    expect(text.split('\n').filter((l) => l !== '')).toHaveLength(92);
    expect(Math.max(...sizes)).toBeLessThan(256 * 1024 + 110_000);
    expect(sizes.length).toBeGreaterThan(20);
    expect(text).toBe(await a.exportSession('big'));
  });
});
