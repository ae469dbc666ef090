/**
 * Named contexts (`palimpsest context add|use|list|remove`, like `nats context` and `temporal
 * env`): a server address with its TLS files and a token file, kept in one JSON file,
 * $PALIMPSEST_CONFIG or $XDG_CONFIG_HOME/palimpsest/contexts.json (default ~/.config/...). The
 * token itself is never stored: only the path of the file holding it.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { UsageError } from './args.js';
import { didYouMean } from './suggest.js';

/** One named context. Paths are absolute. */
export interface Context {
  readonly addr: string;
  readonly tlsCa?: string;
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly tokenFile?: string;
}

/** The contexts file. */
export interface Contexts {
  current?: string;
  contexts: Record<string, Context>;
}

/** Where the contexts live. */
export function contextsPath(env: NodeJS.ProcessEnv): string {
  if (env['PALIMPSEST_CONFIG']) return env['PALIMPSEST_CONFIG'];
  const base = env['XDG_CONFIG_HOME'] || join(env['HOME'] || homedir(), '.config');
  return join(base, 'palimpsest', 'contexts.json');
}

/** The contexts (none when the file does not exist). */
export function readContexts(env: NodeJS.ProcessEnv): Contexts {
  const path = contextsPath(env);
  if (!existsSync(path)) return { contexts: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new UsageError(`the contexts file ${path} is not valid JSON (${(e as Error).message}); fix or delete it`);
  }
  const c = parsed as Partial<Contexts> | null;
  if (c === null || typeof c !== 'object' || typeof c.contexts !== 'object' || c.contexts === null) {
    throw new UsageError(`the contexts file ${path} has no "contexts" object; fix or delete it`);
  }
  return { current: typeof c.current === 'string' ? c.current : undefined, contexts: c.contexts };
}

/** Writes the contexts (owner-only, replaced atomically). */
export function writeContexts(env: NodeJS.ProcessEnv, c: Contexts): void {
  const path = contextsPath(env);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(c, null, 2) + '\n', { mode: 0o600 });
  renameSync(tmp, path);
}

/** The context named `name`, or a UsageError naming the known ones. */
export function contextNamed(c: Contexts, name: string, env: NodeJS.ProcessEnv): Context {
  const ctx = c.contexts[name];
  if (ctx) return ctx;
  const known = Object.keys(c.contexts);
  throw new UsageError(`no context ${JSON.stringify(name)} in ${contextsPath(env)}${didYouMean(name, known)}; `
    + (known.length > 0 ? `known: ${known.join(', ')}` : 'add one with palimpsest context add NAME --addr HOST:PORT'));
}

/**
 * The context a client command uses: `--context NAME` (`explicit`), else $PALIMPSEST_CONTEXT,
 * else the current one; undefined when none is set.
 */
export function activeContext(flag: string | undefined, env: NodeJS.ProcessEnv): { name: string; context: Context; explicit: boolean } | undefined {
  const name = flag || env['PALIMPSEST_CONTEXT'] || undefined;
  const c = name !== undefined || existsSync(contextsPath(env)) ? readContexts(env) : { contexts: {} };
  const chosen = name ?? c.current;
  if (chosen === undefined) return undefined;
  return { name: chosen, context: contextNamed(c, chosen, env), explicit: Boolean(flag) };
}

/** The token a context's token file holds (trimmed). */
export function contextToken(ctx: Context): string | undefined {
  if (!ctx.tokenFile) return undefined;
  try {
    return readFileSync(ctx.tokenFile, 'utf8').trim() || undefined;
  } catch (e) {
    throw new UsageError(`cannot read the context's token file ${ctx.tokenFile} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
}
