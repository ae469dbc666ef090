/**
 * The `palimpsest` command line: `serve` runs the server; every other command is a gRPC client
 * of a running server (see commands/index.ts for the table).
 */
import type { Readable } from 'node:stream';
import { parseServeArgs, SERVE_OPTIONS } from './serve.js';
import { helpText, parseCommandArgs, READ_COMMANDS, UsageError } from './args.js';
import { EXIT, Rpc, connectOptions, reportFailure, toFailure } from './client.js';
import { COMMANDS, findCommand } from './commands/index.js';
import { Output, type OutStream } from './output.js';
import { hoistGlobalOptions } from './global-args.js';
import { didYouMean } from './suggest.js';
import { VERSION } from './version.js';

/** What a serve option's value looks like, from its name (HOST:PORT, FILE, MS, BYTES, N, ...). */
function placeholder(flag: string): string {
  const named: Record<string, string> = {
    listen: 'HOST:PORT', 'metrics-listen': 'HOST:PORT', 'web-listen': 'HOST:PORT', 'web-cors-origins': 'ORIGIN,...', db: 'FILE|URL', durability: 'full|normal', 'sqlite-writer': 'thread|inline', 'search-index': 'on|off', 'log-level': 'LEVEL',
  };
  if (named[flag]) return named[flag];
  if (flag.endsWith('-ms')) return 'MS';
  if (flag.endsWith('-bytes')) return 'BYTES';
  if (flag.startsWith('tls-') || flag.endsWith('-tokens') || flag.endsWith('-file') || flag.endsWith('-positions')) return 'FILE';
  if (/^(max|cache|tenant|retention)-/.test(flag) || flag === 'feed-retention-days') return flag.endsWith('retention-days') ? 'DAYS' : 'N';
  return 'VALUE';
}

const SERVE_HELP = `Usage: palimpsest serve [options]

Starts the gRPC server on its embedded SQLite store.

Options (each also PALIMPSEST_<NAME> in the environment, e.g. PALIMPSEST_LISTEN):
${SERVE_OPTIONS.map((o) => `  --${o.flag}${o.boolean ? '' : ` ${placeholder(o.flag)}`}\n      ${o.help}`).join('\n')}

Example:
  palimpsest serve --listen 127.0.0.1:50051 --db ./sessions.db --durability full
`;

const MAIN_HELP = `Usage: palimpsest COMMAND [options]

Palimpsest session-log service. \`serve\` runs the server; every other command is a gRPC client of a
running server (--addr HOST:PORT, default $PALIMPSEST_ADDR or 127.0.0.1:50051).

Commands:
  ${'serve'.padEnd(10)} Starts the gRPC server.
  ${'backup'.padEnd(10)} Copies a database file online, verified (works on the file, not the server).
  ${'verify'.padEnd(10)} Checks every session of a database file (--db) or a server (--addr).
  ${'reindex'.padEnd(10)} Rebuilds the search index from the events, online (works on the database).
  ${'context'.padEnd(10)} Named connections (address, TLS, token file): context add|use|list|remove.
  ${'completion'.padEnd(10)} Prints shell completion: completion bash|zsh|fish.
${COMMANDS.map((c) => `  ${c.name.padEnd(10)} ${c.summary}`).join('\n')}

Global options (--addr, --token, --json, --tls-*, --connect-timeout) go before or after the
command. \`palimpsest --version\` prints the version.
Every client command takes --json for machine-readable output. Exit status: 0 ok, 1 the server
rejected the request, 2 usage error, 3 the server cannot be reached.
Run \`palimpsest COMMAND --help\` for a command's options.

Example:
  palimpsest serve --db ./sessions.db &
  palimpsest import ./session.jsonl --id demo && palimpsest messages demo
`;

/** The process streams and environment (injectable for in-process tests). */
export interface MainIo {
  readonly stdout: OutStream;
  readonly stderr: OutStream;
  readonly stdin: Readable;
  readonly env: NodeJS.ProcessEnv;
}

const PROCESS_IO: MainIo = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env };

async function serve(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(SERVE_HELP);
    return 0;
  }
  const config = parseServeArgs(argv, process.env);
  // Loaded only here: client commands need not load the store, logger and metrics.
  const { startServer } = await import('../main.js');
  const server = await startServer(config);
  // Before the listening line, so a caller that waits for it (a test, a supervisor) has this too.
  if (server.metricsPort !== undefined) process.stdout.write(`metrics (Prometheus /metrics) on ${config.metricsListen.replace(/:\d+$/, '')}:${server.metricsPort}\n`);
  process.stdout.write(`palimpsest listening on ${server.address}\n`);
  if (server.webPort !== undefined) process.stdout.write(`web port (Connect, gRPC-Web, viewer) on ${config.webListen.replace(/:\d+$/, '')}:${server.webPort}\n`);
  // SIGHUP re-reads the token file; connections and streams stay up. A bad file keeps the
  // previous tokens and is reported.
  const reload = (): void => {
    try {
      server.reloadTokens();
    } catch (e) {
      server.logger.error({ err: (e as Error).message }, 'token file reload failed; keeping the previous tokens');
    }
  };
  process.on('SIGHUP', reload);
  return new Promise<number>((resolve) => {
    const stop = (code: number): void => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      process.off('SIGHUP', reload);
      void server.shutdown().then(() => resolve(code));
    };
    const onSignal = (): void => stop(0);
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    // A PostgreSQL database that never became reachable within --store-wait-ms: exit 1.
    server.storeReady.catch((e: unknown) => {
      process.stderr.write(`error: STORE_UNAVAILABLE: ${(e as Error).message}\n`);
      stop(1);
    });
  });
}

/** Runs a client command: parse, connect, run, close. */
async function client(name: string, argv: string[], io: MainIo): Promise<number> {
  const json = argv.includes('--json');
  let out = new Output(json, io.stdout, io.stderr, io.env);
  let rpc: Rpc | undefined;
  try {
    const command = findCommand(name);
    if (!command) {
      throw new UsageError(`unknown command ${JSON.stringify(name)}${didYouMean(name, ['serve', ...COMMANDS.map((c) => c.name)])}; see palimpsest --help`);
    }
    const args = parseCommandArgs(command, argv);
    const format = args.str('output');
    if (READ_COMMANDS.has(command.name) && format !== undefined) out = new Output(format !== 'table', io.stdout, io.stderr, io.env, format === 'yaml');
    if (args.flag('help')) {
      await out.write(helpText(command));
      return EXIT.OK;
    }
    rpc = await Rpc.connect(connectOptions(args, io.env));
    return (await command.run({ args, out, rpc, stdin: io.stdin, env: io.env })) ?? EXIT.OK;
  } catch (e) {
    const failure = toFailure(e);
    reportFailure(failure, out);
    return failure.exit;
  } finally {
    rpc?.close();
  }
}

/** Runs the CLI; resolves with the exit status. */
export async function main(rawArgv: string[], io: MainIo = PROCESS_IO): Promise<number> {
  let argv: string[];
  try {
    argv = hoistGlobalOptions(rawArgv);
  } catch (e) {
    const out = new Output(rawArgv.includes('--json'), io.stdout, io.stderr, io.env);
    const failure = toFailure(e);
    reportFailure(failure, out);
    return failure.exit;
  }
  const [cmd, ...rest] = argv;
  if (io.stdout === process.stdout) {
    // `palimpsest events s | head`: a closed pipe ends the command quietly.
    process.stdout.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE') process.exit(EXIT.OK);
      throw e;
    });
  }
  if (cmd === '--version' || cmd === '-V' || cmd === 'version') {
    io.stdout.write(`palimpsest ${VERSION}\n`);
    return EXIT.OK;
  }
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    (cmd === undefined ? io.stderr : io.stdout).write(MAIN_HELP);
    return cmd === undefined ? EXIT.USAGE : EXIT.OK;
  }
  if (cmd === 'backup') return (await import('./backup.js')).backup(rest, io);
  if (cmd === 'verify') return (await import('./verify.js')).verify(rest, io);
  if (cmd === 'reindex') return (await import('./reindex.js')).reindex(rest, io);
  if (cmd === 'context') return (await import('./context.js')).context(rest, io);
  if (cmd === 'completion') return (await import('./completion.js')).completion(rest, io);
  if (cmd !== 'serve') return client(cmd, rest, io);
  try {
    return await serve(rest);
  } catch (e) {
    io.stderr.write(`error: ${(e as Error).message}\n`);
    return e instanceof UsageError ? EXIT.USAGE : EXIT.REJECTED;
  }
}
