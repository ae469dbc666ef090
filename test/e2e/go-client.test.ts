/**
 * The Go client package (clients/go/palimpsest, issue #18): `go vet` and `go test` in GOPATH mode
 * against Debian's Go packages, run against a real server: event builders, decoded *Error,
 * idempotency keys, UNAVAILABLE retries, a surface subscription and the session feed that resume by
 * themselves, and UpdateSession.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { ensureBuilt } from '../support/server-process.js';
import { startTestServer, type TestServer } from '../support/test-server.js';
import { missingGo, run, toolchainIt } from '../support/toolchains.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('Go package clients/go/palimpsest', () => {
  let ts: TestServer;
  // Its own build dir: the polyglot test regenerates the shared one concurrently.
  const build = mkdtempSync(join(tmpdir(), 'palimpsest-go-'));
  beforeAll(async () => {
    ensureBuilt(); // the feed's restart test runs `node bin/palimpsest.mjs serve` (dist/) itself
    ts = await startTestServer();
  }, 120_000);
  afterAll(async () => {
    await ts?.stop();
    rmSync(build, { recursive: true, force: true });
  });

  toolchainIt('go', missingGo(), 'go vet + go test against a real server', async () => {
    const r = await run(join(ROOT, 'clients', 'run.sh'), ['test', 'go', ts.server.address, '-v'], { cwd: ROOT, timeoutMs: 180_000, env: { ...process.env, PALIMPSEST_CLIENTS_BUILD: build, PALIMPSEST_NODE: process.execPath } });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const passed = r.stdout.split('\n').filter((l) => l.startsWith('--- PASS: ')).map((l) => l.split(' ')[2]);
    expect(passed).toEqual(expect.arrayContaining([
      'TestTurnWithBuilders', 'TestErrorsAreDecodedAndLeaveTheLogUntouched', 'TestAppendsCarryIdempotencyKeys',
      'TestUnavailableIsRetried', 'TestSubscribeSurfaceResumes', 'TestSubscribeSurfaceEnds',
      'TestCompactionShowsTheSummaryAndAsOfShowsBefore', 'TestPruneToolResults', 'TestToolPairingBrokenIsDecodedAndLeavesTheLogUntouched',
      'TestRetryRebuildsTheBatchWithTheSameKey', 'TestRepairForkAndListSessionsPaged', 'TestExportThenImport', 'TestDerivedIDIsTheSameInEveryClient',
      'TestUpdateSessionSetsAndRemovesLabels', 'TestStaleUpdateIsRefusedAndChangesNothing', 'TestFeedReportsEveryKindOfChange',
      'TestFeedResumesExactlyOnceAfterDroppedConnections', 'TestFeedContinuesAfterTheLastPosition', 'TestFeedWithoutReconnectReturnsUnavailable',
      'TestFeedResumesAcrossAServerRestart', 'TestWriterPipelinesBatchesInOrder', 'TestWriterRefusedBatchFailsAlone',
      'TestWriterCloseWaitsForOutstandingBatches', 'TestWriterBrokenStreamFailsOutstandingBatches',
      'TestSearchFindsHitsNewestFirstWithMarkedSnippets', 'TestSearchAppliesEveryFilter', 'TestSearchPages', 'TestSearchMalformedQueryNamesItsPosition',
    ]));
    expect(r.stdout).not.toContain('--- FAIL');
    expect(r.stdout).toMatch(/^ok\s+palimpsest\.dev\/go\/palimpsest/m);
  }, 200_000);
});
