/**
 * Headless Chromium for the viewer tests (playwright-core driving Debian's /usr/bin/chromium;
 * nothing is downloaded). A fresh profile per launch, no background networking.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** Whether the browser is installed (.ci/system-deps installs it). */
export function hasChromium(): boolean {
  return existsSync(CHROMIUM);
}

/** A launched browser and its teardown. */
export interface TestBrowser {
  /** A persistent context on the fresh profile (pages: `context.newPage()`). */
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/** Launches headless Chromium with a fresh user-data dir. */
export async function launchChromium(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'palimpsest-chromium-'));
  // The profile is passed as the persistent context's user-data dir (Playwright's form of
  // --user-data-dir).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-default-apps'],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
