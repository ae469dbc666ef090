/**
 * A throwaway PostgreSQL cluster (test/support/postgres-global-setup.ts starts one per test run;
 * the benches start their own).
 *
 * The cluster lives in a temp directory: `initdb` + `pg_ctl` from Debian's packaged binaries
 * (/usr/lib/postgresql/<major>/bin, the newest installed; PALIMPSEST_PG_BIN overrides), listening on
 * 127.0.0.1 at a free port plus a unix socket in the same directory, trust auth, fsync on. PostgreSQL
 * refuses to run as root: as root the binaries run as the unprivileged `postgres` user (`runuser -u
 * postgres --`, the directory owned by that user); otherwise they run as the current user.
 *
 * Everything is removed by `stop()`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The newest installed PostgreSQL bin directory, or undefined. */
export function findPgBin(): string | undefined {
  const override = process.env.PALIMPSEST_PG_BIN;
  if (override) return existsSync(join(override, 'initdb')) ? override : undefined;
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const majors = readdirSync(base)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] === undefined ? undefined : join(base, majors[0], 'bin');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** A running throwaway cluster. */
export interface TestCluster {
  /** Admin URL (superuser `postgres`, database `postgres`). */
  readonly adminUrl: string;
  /** The data directory (its postmaster.pid names the server's process). */
  readonly dataDir: string;
  stop(): void;
}

/** Starts a throwaway cluster (see the module comment); `settings` are more `name=value` server options (profiling scripts). */
export async function startCluster(bin: string, settings: readonly string[] = []): Promise<TestCluster> {
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'palimpsest-pg-'));
  const run = (cmd: string, args: string[]): void => {
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args]] : [join(bin, cmd), args];
    const r = spawnSync(file, argv, { encoding: 'utf8', cwd: dir });
    if (r.status !== 0) {
      const log = existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8') : '';
      throw new Error(`${cmd} failed (${r.status ?? r.signal}): ${r.stderr}${r.stdout}\n${log}`);
    }
  };
  try {
    if (asRoot) {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(dir, uid, gid);
    }
    const data = join(dir, 'data');
    // -N: initdb's own files need no fsync (a throwaway cluster); the server keeps fsync on.
    run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '-N']);
    const port = await freePort();
    const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=64MB${settings.map((x) => ` -c ${x}`).join('')}`;
    run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', '-o', opts, 'start']);
    return {
      adminUrl: `postgresql://postgres@127.0.0.1:${port}/postgres`,
      dataDir: data,
      stop() {
        try {
          run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

