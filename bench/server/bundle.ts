/**
 * The benchmarks' server processes run bench/server/child.ts bundled once with esbuild (tsx's own
 * dependency; npm packages stay external) by plain node, as production runs the compiled server.
 * The SQLite writer thread's and search follower thread's entries are bundled next to it (the store
 * starts them from the bundle's directory, as from dist/). Without esbuild the child runs through the tsx loader (slower
 * process start: transpiling). The SQLite checksum extension is copied next to the bundle too
 * (`sqlite-ext/build/`, where the store looks above its module): without it the bundled server would
 * verify rows in JavaScript, and the read figures would measure that.
 */
import { copyFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');

/**
 * Node options of every server process the benches start, Palimpsest's, the ceilings' and the
 * peer's alike (the same process tuning on both sides of a ratio), and of `npm start`
 * (test/integration/server-node-flags.test.ts keeps package.json's start script in step). V8
 * reads them at start-up only and NODE_OPTIONS refuses them, so they go on node's command line.
 * They come after any options a bench prepends (SUB_NODE_FLAGS): V8 keeps the last value.
 *
 * `--initial-old-space-size=128`: a 128 MB floor under the old generation's allocation limit,
 * without which a small heap under load is collected in full several times a second
 * (bench/history/round-08.md; docs/operations.md "Running the server").
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--initial-old-space-size=128'];

/** The node arguments that start the bench server child (SERVER_NODE_FLAGS first). */
export async function bundleServerChild(): Promise<string[]> {
  const childScript = join(here, 'child.ts');
  try {
    const { build } = await import('esbuild');
    const out = join(root, 'node_modules', '.cache', 'palimpsest-bench');
    // The worker's entry is an ES module named .js, as in dist/: say so for this directory.
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, 'package.json'), '{"type":"module"}\n');
    const common = { bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', logLevel: 'error' } as const;
    // Split at dynamic imports, as the compiled server loads them (dist/): inlined, their static
    // imports (pg, the PostgreSQL store's) would load in every SQLite server's start-up. Chunks
    // stay next to the entry: the store finds its workers and extension from its module's directory.
    await build({ ...common, entryPoints: { child: childScript }, outdir: out, splitting: true, outExtension: { '.js': '.mjs' }, chunkNames: '[name]-[hash]' });
    for (const worker of ['append-thread-worker', 'search-follow-worker', 'wal-checkpoint-worker']) {
      await build({ ...common, entryPoints: [join(root, 'src', 'store', 'sqlite', `${worker}.ts`)], outfile: join(out, `${worker}.js`) });
    }
    // This build's extension, or none (never a stale copy from an earlier bundle).
    rmSync(join(out, 'sqlite-ext'), { recursive: true, force: true });
    for (const file of ['palimpsest_checksums.so', 'palimpsest_checksums.dylib']) {
      const built = join(root, 'sqlite-ext', 'build', file);
      if (!existsSync(built)) continue;
      mkdirSync(join(out, 'sqlite-ext', 'build'), { recursive: true });
      copyFileSync(built, join(out, 'sqlite-ext', 'build', file));
    }
    return [...SERVER_NODE_FLAGS, join(out, 'child.mjs')];
  } catch (e) {
    console.error(`esbuild unavailable (${(e as Error).message}); server processes run through tsx`);
    return [...SERVER_NODE_FLAGS, '--import', 'tsx', childScript];
  }
}

/** `--sqlite-writer inline` on the bench's command line: SQLite appends in the event loop (default: the writer thread). */
export function sqliteWriterArg(argv: readonly string[]): 'thread' | 'inline' {
  const i = argv.indexOf('--sqlite-writer');
  return i >= 0 && argv[i + 1] === 'inline' ? 'inline' : 'thread';
}
