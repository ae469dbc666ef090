/**
 * Young-generation promotion under append load, after one full collection (bench/README.md,
 * sixth round: Maps set and cleared per event or per call promoted everything they held). Guards
 * the app's planned batches, the SQLite writer thread's owed calls, and a closed HTTP/2 stream
 * dropping its call.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDbDir } from '../support/temp-db.js';

const PROBE = fileURLToPath(new URL('../support/gc-probe.ts', import.meta.url));

/** MB promoted by the scavenges between the probe's start and end marks. */
function promotedMb(store: 'memory' | 'sqlite' | 'grpc', path = ''): { promoted: number; scavenges: number } {
  const r = spawnSync(process.execPath, ['--expose-gc', '--trace-gc', '--trace-gc-nvp', '--import', 'tsx', PROBE, store, '1500', path], { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`gc probe (${store}) failed: status ${r.status}, signal ${r.signal}, ${r.error?.message ?? ''}\n${r.stderr}`);
  const lines = r.stdout.split('\n');
  const from = lines.indexOf('PROBE START');
  const to = lines.indexOf('PROBE END');
  expect(from).toBeGreaterThanOrEqual(0);
  expect(to).toBeGreaterThan(from);
  let promoted = 0;
  let scavenges = 0;
  for (const line of lines.slice(from, to)) {
    if (!line.includes(' gc=s ')) continue;
    scavenges++;
    promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
  }
  return { promoted: promoted / 1e6, scavenges };
}

const dbs = tempDbDir('palimpsest-gc-probe-');

describe('objects promoted by scavenges under append load, after a full collection', () => {
  it('memory store: almost nothing (each batch dies young)', () => {
    // 0.1 MB as built; ~15 MB with the planned events in a Map by seq.
    const { promoted, scavenges } = promotedMb('memory');
    expect(scavenges).toBeGreaterThan(10);
    expect(promoted).toBeLessThan(4);
  }, 90_000);

  it('SQLite store, writer thread: a few MB at most', () => {
    // ~4.5 MB as built; ~18.5 MB with the owed calls in a Map by id, ~23 MB with both Maps.
    const { promoted, scavenges } = promotedMb('sqlite', dbs.freshPath());
    expect(scavenges).toBeGreaterThan(10);
    expect(promoted).toBeLessThan(12);
  }, 90_000);

  it('the whole server over gRPC (native transport, memory store): a few MB at most', () => {
    // ~7 MB as built (the client's own streams, node:http2's stream table); ~46 MB when a closed
    // stream still points at its call.
    const { promoted, scavenges } = promotedMb('grpc');
    expect(scavenges).toBeGreaterThan(10);
    expect(promoted).toBeLessThan(20);
  }, 90_000);
});
