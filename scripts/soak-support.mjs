/**
 * What the soak (scripts/soak.mjs) and its probe (scripts/pg-native-probe.mjs) share: a free
 * port, a throwaway PostgreSQL cluster, and on a SessionService client of the built stubs
 * (dist/gen) unary calls with a 30 s deadline, event builders and the kinds of load the soak mixes.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const svc = await import(join(ROOT, 'dist/gen/palimpsest/v1/service.js'));

/** Request codecs by method (fromPartial fills every field the encoders expect). */
const CODECS = {
  createSession: svc.CreateSessionRequest, deleteSession: svc.DeleteSessionRequest, appendEvents: svc.AppendEventsRequest,
  planCompaction: svc.PlanCompactionRequest, compact: svc.CompactRequest,
};

/** A unary call of `method` with the request built from `req`. */
export const unary = (client, method, req) => new Promise((resolve, reject) => client[method](CODECS[method].fromPartial(req), { deadline: Date.now() + 30_000 }, (e, r) => (e ? reject(e) : resolve(r))));
/** An event with JSON data (`append`: it enters the surface). */
export const json = (type, data, append = false) => ({ type, data: { kind: { $case: 'json', value: JSON.stringify(data) } }, surfaceOp: append ? { $case: 'append', value: {} } : undefined, ignorable: false });
export const userMessage = (id, text) => json('user/message', { id, role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } }, true);

/** The soak's kinds of operation on client `c`, each for session `id` at operation number `n`. */
export function soakOperations(c) {
  return {
    append: (id, n) => unary(c, 'appendEvents', { sessionId: id, events: [n % 2 ? userMessage(`u${n}`, `hello ${n}`) : json('x/note', { n })] }),
    batch: (id, n) => unary(c, 'appendEvents', { sessionId: id, events: Array.from({ length: 20 }, (_, i) => json('x/note', { n, i, pad: 'p'.repeat(100) })) }),
    /** PlanCompaction and, when it finds something to compact, Compact. */
    compact: async (id) => {
      const plan = await unary(c, 'planCompaction', { sessionId: id, budget: { $case: 'keepTokens', value: 50 }, omitMessages: true });
      if (plan.start === undefined) return;
      await unary(c, 'compact', { sessionId: id, start: plan.start, end: plan.end, expectedLastSeq: plan.expectedLastSeq, summary: { $case: 'summaryText', value: 'summary' }, provider: 'soak', model: 'soak-1' });
    },
    /** The session exported, imported as `imp-<n>` and that deleted. */
    exportImport: async (id, n) => {
      const lines = await new Promise((resolve, reject) => {
        const parts = [];
        const s = c.exportSession(svc.ExportSessionRequest.fromPartial({ sessionId: id }), { deadline: Date.now() + 30_000 });
        s.on('data', (m) => parts.push(Buffer.from(m.chunk)));
        s.on('error', reject);
        s.on('end', () => resolve(Buffer.concat(parts)));
      });
      const imported = `imp-${n}`;
      await new Promise((resolve, reject) => {
        const s = c.importSession({ deadline: Date.now() + 30_000 }, (e, r) => (e ? reject(e) : resolve(r)));
        s.write({ part: { $case: 'options', value: svc.ImportOptions.fromPartial({ sessionId: imported }) } });
        s.write({ part: { $case: 'chunk', value: lines } });
        s.end();
      });
      await unary(c, 'deleteSession', { sessionId: imported });
    },
    /** SubscribeEvents, cancelled after five events or 2 s (an error ends it too). */
    subscribe: (id) => new Promise((resolve) => {
      const s = c.subscribeEvents(svc.SubscribeEventsRequest.fromPartial({ sessionId: id, dataFormat: svc.DataFormat.DATA_FORMAT_UNSPECIFIED }));
      let seen = 0;
      const end = () => {
        s.cancel();
        resolve();
      };
      s.on('data', () => {
        if (++seen >= 5) end();
      });
      s.on('error', () => resolve());
      setTimeout(end, 2_000);
    }),
  };
}

/**
 * Resolves once a spawned `palimpsest serve` (stdout piped) prints its listening line, with its
 * gRPC address and, with `--metrics-listen HOST:0`, the metrics port it bound (printed before).
 */
export function listening(proc) {
  return new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /palimpsest listening on (\S+)/.exec(out);
      if (m) resolve({ address: m[1], metricsPort: Number(/^metrics \(Prometheus \/metrics\) on \S+:(\d+)$/m.exec(out)?.[1]) });
    });
    proc.once('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
}

/** A port free on 127.0.0.1 now. */
export function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * A throwaway PostgreSQL cluster (initdb + pg_ctl, as test/support/pg-cluster.ts) in a temporary
 * directory named `prefix…`, started with the server settings `settings` (`-c` options).
 */
export async function startCluster(prefix, settings) {
  const base = '/usr/lib/postgresql';
  const major = existsSync(base) ? readdirSync(base).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a))[0] : undefined;
  if (major === undefined) throw new Error('no PostgreSQL under /usr/lib/postgresql; pass --pg-admin-url');
  const bin = join(base, major, 'bin');
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (asRoot) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })));
  const run = (cmd, a) => {
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, cmd), ...a]] : [join(bin, cmd), a];
    const r = spawnSync(file, argv, { encoding: 'utf8', cwd: dir });
    if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stderr}${r.stdout}`);
  };
  const data = join(dir, 'data');
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale', '-N']);
  const port = await freePort();
  run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 ${settings}`, 'start']);
  return { adminUrl: `postgresql://postgres@127.0.0.1:${port}/postgres`, stop: () => { run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']); rmSync(dir, { recursive: true, force: true }); } };
}
