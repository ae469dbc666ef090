/**
 * Every one of the 36 recorded reference sessions through all four renderers (issue #34): the
 * rendered history keeps every tool-call id of the model history, pairs every call with its
 * result, alternates roles where the provider requires it, and cites only seqs of the history.
 * None is refused: the reference answers every call before the next message.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MessageProjection } from '../../src/domain/derive.js';
import { decodeJsonl } from '../../src/domain/jsonl-reader.js';
import { SessionEngine } from '../../src/domain/session-engine.js';
import { PROVIDER_FORMATS, renderHistory, type HistoryEntry } from '../../src/domain/render/index.js';
import { providerProblems, renderedCallIds } from '../support/provider-invariants.js';

const DIR = new URL('../fixtures/reference-sessions', import.meta.url).pathname;
const files = readdirSync(DIR).filter((f) => f.endsWith('.jsonl')).sort();

function history(file: string): HistoryEntry[] {
  const { header, events } = decodeJsonl(readFileSync(join(DIR, file), 'utf8'));
  const engine = SessionEngine.create();
  const plan = engine.plan(events, { mode: 'import', now: () => 0, sessionId: header.id, lookup: () => undefined, allowSeqGaps: true });
  engine.commit(plan);
  const projection = new MessageProjection(header.id);
  projection.hydrate([], 0);
  projection.apply(plan);
  return projection.entries();
}

function dshCallIds(h: HistoryEntry[]): string[] {
  const out: string[] = [];
  for (const { message } of h) for (const b of (Array.isArray(message['content']) ? message['content'] : []) as { type?: string; id?: string }[]) if (b.type === 'tool-call') out.push(b.id as string);
  return out;
}

describe('all 36 reference sessions through all four renderers', () => {
  it('has 36 files', () => expect(files).toHaveLength(36));

  for (const format of PROVIDER_FORMATS) {
    it.each(files)(`${format}: %s renders to a history the provider accepts, ids kept`, (file) => {
      const h = history(file);
      // None of them is refused (the reference always answers a call before the next message).
      const rendered = renderHistory(format, h);
      const json = rendered.map((r) => r.json);
      expect(providerProblems(format, json)).toEqual([]);
      expect(renderedCallIds(format, json)).toEqual(dshCallIds(h));
      // Seqs: ascending, from the history, every message's seq cited once or more.
      const cited = new Set(rendered.flatMap((r) => r.seqs));
      for (const r of rendered) expect(r.seqs).toEqual([...r.seqs].sort((a, b) => a - b));
      for (const s of cited) expect(h.some((x) => x.seq === s)).toBe(true);
    });
  }
});

