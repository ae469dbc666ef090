/**
 * Provider renderings with blob references (src/app/blob-ref-render.ts, docs/blobs.md): the
 * reference object replaces the whole string that carried the bytes in each provider's shape, and
 * a history without references renders exactly as renderHistory does.
 */
import { describe, expect, it } from 'vitest';
import { renderWithRefs } from '../../src/app/blob-ref-render.js';
import type { MessageJson } from '../../src/domain/message-view.js';
import { renderHistory, type ProviderFormat } from '../../src/domain/render/index.js';

const ref = { $blob: `sha256:${'ab'.repeat(32)}`, bytes: 10, mediaType: 'image/png', encoding: 'base64' };
const user = (data: unknown): MessageJson => ({
  id: 'u0', role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image', attachment: { mimeType: 'image/png', data } }], source: { kind: 'user' },
} as unknown as MessageJson);

describe('renderWithRefs', () => {
  it.each([
    ['openai-chat', [0, 'content', 1, 'image_url', 'url']],
    ['openai-responses', [0, 'content', 1, 'image_url']],
    ['anthropic', [0, 'content', 1, 'source', 'data']],
    ['gemini', [0, 'parts', 1, 'inlineData', 'data']],
  ] as [ProviderFormat, (string | number)[]][])('%s: the reference replaces the image field that carried the bytes', (format, path) => {
    const out = renderWithRefs(format, [{ seq: 0, message: user(ref) }], {});
    expect(path.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], out.map((r) => r.json))).toEqual(ref);
    expect(JSON.stringify(out)).not.toContain('palimpsest-blob');
    expect(out.map((r) => r.seqs)).toEqual([[0]]);
  });

  it('a history without references renders exactly as renderHistory, and an object that only looks like one is data', () => {
    const entries = [{ seq: 0, message: user('aGVsbG8=') }, { seq: 1, message: user({ $blob: 'sha256:short' }) }];
    for (const format of ['openai-chat', 'anthropic'] as ProviderFormat[]) {
      expect(renderWithRefs(format, entries, {})).toEqual(renderHistory(format, entries, {}));
    }
  });

  const textRef = { $blob: `sha256:${'cd'.repeat(32)}`, bytes: 70_000, mediaType: 'text/plain; charset=utf-8' };
  const assistant = (...texts: unknown[]): MessageJson => ({
    id: 'a0', role: 'assistant', content: texts.map((text) => ({ type: 'text', text })), source: { kind: 'assistant' },
  } as unknown as MessageJson);

  it('a format that joins a blobbed text with other text into one string is HISTORY_NOT_RENDERABLE (nothing dropped); keeping parts apart renders', () => {
    for (const format of ['openai-chat', 'openai-responses'] as ProviderFormat[]) {
      for (const m of [assistant('Here is the plan:', textRef), assistant(textRef, { ...textRef, $blob: `sha256:${'ef'.repeat(32)}` })]) {
        let err: unknown;
        try {
          renderWithRefs(format, [{ seq: 3, message: m }], {});
        } catch (e) {
          err = e;
        }
        expect(err, format).toMatchObject({ reason: 'HISTORY_NOT_RENDERABLE', metadata: { seq: '3', rule: 'blob-ref-whole-value', format } });
      }
      // One blobbed text alone is its whole string: the reference stands for it.
      expect(JSON.stringify(renderWithRefs(format, [{ seq: 3, message: assistant(textRef) }], {}))).toContain(textRef.$blob);
    }
    // Anthropic keeps each part: both texts survive, the reference in place of the blobbed one.
    const out = JSON.stringify(renderWithRefs('anthropic', [{ seq: 3, message: assistant('Here is the plan:', textRef) }], {}));
    expect(out).toContain('Here is the plan:');
    expect(out).toContain(textRef.$blob);
  });
});
