/**
 * `palimpsest context add|use|list|remove`: named connections (see contexts-file.ts). A client
 * command uses `--context NAME`, $PALIMPSEST_CONTEXT, or the current context.
 */
import { resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { OUTPUT_FORMATS, UsageError } from './args.js';
import { EXIT, reportFailure, toFailure } from './client.js';
import { contextNamed, contextsPath, readContexts, writeContexts, type Context } from './contexts-file.js';
import { formatTable, Output, type OutStream } from './output.js';
import { didYouMean } from './suggest.js';

/** The help text of `palimpsest context`. */
export const CONTEXT_HELP = `Usage: palimpsest context add NAME --addr HOST:PORT [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--token-file FILE] [--use]
       palimpsest context use NAME
       palimpsest context list [-o json|yaml|table]
       palimpsest context remove NAME

Named connections: an address with its TLS files and the file holding the bearer token (the
token itself is not stored). Client commands connect as --context NAME says, else as
$PALIMPSEST_CONTEXT's or the current context says; a flag (--addr, --token, --tls-*) always wins,
and the PALIMPSEST_* variables win over a context that was not named with --context.
The first context added becomes the current one; \`add\` replaces a context of the same name.
Contexts live in $PALIMPSEST_CONFIG, else $XDG_CONFIG_HOME/palimpsest/contexts.json (default
~/.config/palimpsest/contexts.json).

Examples:
  palimpsest context add prod --addr sessions.internal:50051 --tls-ca ca.pem --token-file ~/.palimpsest-token
  palimpsest context use prod && palimpsest sessions
  palimpsest sessions --context local
`;

interface Io {
  readonly stdout: OutStream;
  readonly stderr: OutStream;
  readonly stdin: Readable;
  readonly env: NodeJS.ProcessEnv;
}

const SUBCOMMANDS = ['add', 'use', 'list', 'remove'] as const;

/** Runs `palimpsest context ...`; resolves with the exit status. */
export async function context(argv: string[], io: Io): Promise<number> {
  let out = new Output(argv.includes('--json'), io.stdout, io.stderr, io.env);
  try {
    const { values, positionals } = parseArgs({
      args: argv, allowPositionals: true, strict: true,
      options: {
        addr: { type: 'string' }, 'tls-ca': { type: 'string' }, 'tls-cert': { type: 'string' }, 'tls-key': { type: 'string' },
        'token-file': { type: 'string' }, use: { type: 'boolean' }, json: { type: 'boolean' }, output: { type: 'string', short: 'o' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    const [sub, name, extra] = positionals;
    if (values.help || sub === undefined) {
      (sub === undefined && !values.help ? io.stderr : io.stdout).write(CONTEXT_HELP);
      return sub === undefined && !values.help ? EXIT.USAGE : EXIT.OK;
    }
    if (!(SUBCOMMANDS as readonly string[]).includes(sub)) {
      throw new UsageError(`unknown context command ${JSON.stringify(sub)}${didYouMean(sub, SUBCOMMANDS)}; see palimpsest context --help`);
    }
    if (extra !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(extra)}; see palimpsest context --help`);
    const format = values.output;
    if (format !== undefined) {
      if (!(OUTPUT_FORMATS as readonly string[]).includes(format)) throw new UsageError(`-o must be ${OUTPUT_FORMATS.join(', ')}, got ${JSON.stringify(format)}`);
      out = new Output(format !== 'table', io.stdout, io.stderr, io.env, format === 'yaml');
    }
    const all = readContexts(io.env);
    if (sub === 'list') {
      if (name !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(name)}; see palimpsest context --help`);
      const rows = Object.entries(all.contexts).map(([n, c]) => ({ name: n, current: n === all.current, ...c }));
      if (out.json) await out.printJson(rows);
      else if (rows.length === 0) await out.write(out.style.dim(`no contexts in ${contextsPath(io.env)} (palimpsest context add NAME --addr HOST:PORT)\n`));
      else {
        await out.write(formatTable(['CURRENT', 'NAME', 'ADDR', 'TLS', 'TOKEN FILE'], rows.map((r) => [
          r.current ? '*' : '', r.name, r.addr, r.tlsCert ? 'mutual' : r.tlsCa ? 'yes' : 'no', r.tokenFile ?? '',
        ]), out.style));
      }
      return EXIT.OK;
    }
    if (name === undefined) throw new UsageError(`palimpsest context ${sub} needs a NAME; see palimpsest context --help`);
    if (sub === 'add') {
      if (!values.addr) throw new UsageError('palimpsest context add needs --addr HOST:PORT');
      if ((values['tls-cert'] === undefined) !== (values['tls-key'] === undefined)) throw new UsageError('--tls-cert and --tls-key go together');
      const path = (p: string | undefined) => (p === undefined ? undefined : resolve(p));
      const ctx: Context = {
        addr: values.addr, tlsCa: path(values['tls-ca']), tlsCert: path(values['tls-cert']), tlsKey: path(values['tls-key']), tokenFile: path(values['token-file']),
      };
      const existed = name in all.contexts;
      all.contexts[name] = JSON.parse(JSON.stringify(ctx)) as Context; // drops the unset fields
      if (values.use || all.current === undefined) all.current = name;
      writeContexts(io.env, all);
      await report(out, { name, added: !existed, updated: existed, current: all.current === name }, `context ${name} ${existed ? 'updated' : 'added'}${all.current === name ? ' (current)' : ''}`);
    } else if (sub === 'use') {
      contextNamed(all, name, io.env);
      all.current = name;
      writeContexts(io.env, all);
      await report(out, { name, current: true }, `using context ${name}`);
    } else {
      contextNamed(all, name, io.env);
      delete all.contexts[name];
      if (all.current === name) all.current = undefined;
      writeContexts(io.env, all);
      await report(out, { name, removed: true }, `context ${name} removed`);
    }
    return EXIT.OK;
  } catch (e) {
    const failure = toFailure(e instanceof Error && (e as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS') ? new UsageError(`${e.message}; see palimpsest context --help`) : e);
    reportFailure(failure, out);
    return failure.exit;
  }
}

async function report(out: Output, json: Record<string, unknown>, text: string): Promise<void> {
  if (out.json) await out.printJson(json);
  else await out.write(`${text}\n`);
}
