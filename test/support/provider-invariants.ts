/**
 * The request rules each provider publishes, checked on a rendered history (issue #34): tool-call
 * ids pair up with the results right after them, roles alternate where the provider requires it,
 * tool results come first in an Anthropic user message, no empty message. Returns the problems
 * found (empty when the history is valid).
 */
import type { ProviderFormat } from '../../src/domain/render/index.js';

type O = Record<string, unknown>;
const arr = (v: unknown): O[] => (Array.isArray(v) ? (v as O[]) : []);

function sameSet(a: string[], b: string[]): boolean {
  return a.length === b.length && [...a].sort().join('\0') === [...b].sort().join('\0');
}

/** The call ids a rendered history holds, in order. */
export function renderedCallIds(format: ProviderFormat, msgs: readonly unknown[]): string[] {
  const out: string[] = [];
  for (const m of msgs as O[]) {
    if (format === 'openai-chat') for (const c of arr(m['tool_calls'])) out.push(c['id'] as string);
    else if (format === 'openai-responses') { if (m['type'] === 'function_call') out.push(m['call_id'] as string); }
    else if (format === 'anthropic') for (const b of arr(m['content'])) { if (b['type'] === 'tool_use') out.push(b['id'] as string); }
    else for (const p of arr(m['parts'])) if (p['functionCall'] !== undefined) out.push((p['functionCall'] as O)['id'] as string);
  }
  return out;
}

/** Problems of a rendered history (see the module comment). */
export function providerProblems(format: ProviderFormat, msgs: readonly unknown[]): string[] {
  const p: string[] = [];
  const ms = msgs as O[];
  if (format === 'openai-chat') {
    for (let i = 0; i < ms.length; i++) {
      const m = ms[i]!;
      if (m['role'] === 'tool') { p.push(`${i}: tool message without a preceding assistant tool_calls`); continue; }
      if (m['role'] === 'assistant' && m['content'] === null && arr(m['tool_calls']).length === 0) p.push(`${i}: empty assistant`);
      if (m['role'] === 'user' && (m['content'] === '' || (Array.isArray(m['content']) && (m['content'] as unknown[]).length === 0))) p.push(`${i}: empty user`);
      const calls = arr(m['tool_calls']).map((c) => c['id'] as string);
      if (calls.length === 0) continue;
      const answered: string[] = [];
      while (ms[i + 1]?.['role'] === 'tool') answered.push(ms[++i]!['tool_call_id'] as string);
      if (!sameSet(calls, answered)) p.push(`${i}: tool_calls ${calls.join(',')} answered by ${answered.join(',')}`);
    }
  } else if (format === 'openai-responses') {
    let open = new Set<string>();
    for (let i = 0; i < ms.length; i++) {
      const m = ms[i]!;
      if (m['type'] === 'function_call') open.add(m['call_id'] as string);
      else if (m['type'] === 'function_call_output') {
        if (!open.delete(m['call_id'] as string)) p.push(`${i}: output for ${String(m['call_id'])} without an open call`);
      } else {
        if (open.size > 0) p.push(`${i}: message while calls ${[...open].join(',')} are open`);
        open = new Set();
        if (typeof m['content'] === 'string' ? m['content'] === '' : arr(m['content']).length === 0) p.push(`${i}: empty message`);
      }
    }
    if (open.size > 0) p.push(`end: calls ${[...open].join(',')} open`);
  } else {
    const key = format === 'anthropic' ? 'content' : 'parts';
    const model = format === 'anthropic' ? 'assistant' : 'model';
    for (let i = 0; i < ms.length; i++) {
      const m = ms[i]!;
      if (i > 0 && ms[i - 1]!['role'] === m['role']) p.push(`${i}: two ${String(m['role'])} messages in a row`);
      const blocks = arr(m[key]);
      if (blocks.length === 0) p.push(`${i}: empty content`);
      const results = format === 'anthropic'
        ? blocks.filter((b) => b['type'] === 'tool_result').map((b) => b['tool_use_id'] as string)
        : blocks.filter((b) => b['functionResponse'] !== undefined).map((b) => (b['functionResponse'] as O)['id'] as string);
      if (format === 'anthropic') {
        const firstOther = blocks.findIndex((b) => b['type'] !== 'tool_result');
        if (firstOther >= 0 && blocks.slice(firstOther).some((b) => b['type'] === 'tool_result')) p.push(`${i}: tool_result after other content`);
      }
      const prev = i > 0 ? ms[i - 1]! : undefined;
      const calls = prev === undefined ? [] : format === 'anthropic'
        ? arr(prev[key]).filter((b) => b['type'] === 'tool_use').map((b) => b['id'] as string)
        : arr(prev[key]).filter((b) => b['functionCall'] !== undefined).map((b) => (b['functionCall'] as O)['id'] as string);
      if (m['role'] === 'user' && !sameSet(calls, results)) p.push(`${i}: results ${results.join(',')} do not answer calls ${calls.join(',')}`);
      if (m['role'] === model && i === ms.length - 1) {
        const own = format === 'anthropic' ? blocks.filter((b) => b['type'] === 'tool_use') : blocks.filter((b) => b['functionCall'] !== undefined);
        if (own.length > 0) p.push(`${i}: last message has unanswered calls`);
      }
    }
  }
  return p;
}
