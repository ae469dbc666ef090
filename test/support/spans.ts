/**
 * Assertions over finished OpenTelemetry spans shared by the tracing tests of both ports.
 */
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { expect } from 'vitest';

/** The RPC span has store spans as children, all in its trace, and no store span lies outside that trace. */
export function expectStoreSpansUnder(spans: readonly ReadableSpan[], rpc: ReadableSpan, traceId: string): void {
  const children = spans.filter((s) => s.parentSpanContext?.spanId === rpc.spanContext().spanId);
  expect(children.length).toBeGreaterThan(0);
  for (const c of children) {
    expect(c.name).toMatch(/^store\./);
    expect(c.spanContext().traceId).toBe(traceId);
  }
  expect(spans.filter((s) => s.name.startsWith('store.')).every((s) => s.spanContext().traceId === traceId)).toBe(true);
}
