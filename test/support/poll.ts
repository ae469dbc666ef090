/**
 * Polling for conditions that need an async check (a store read, another process): `waitFor`
 * re-checks every `intervalMs` until the condition holds or `ms` passes. For synchronous
 * conditions, test/support/subscribe.ts's `eventually`.
 */
export async function waitFor(cond: () => boolean | Promise<boolean>, ms = 15_000, what = 'condition', intervalMs = 20): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
