/**
 * The `palimpsest` command line: `serve` runs the server; every other command is a gRPC client
 * of a running server.
 */
import { parseServeArgs, SERVE_OPTIONS, UsageError } from './serve.js';
import { startServer } from '../server/server.js';

const SERVE_HELP = `Usage: palimpsest serve [options]

Starts the gRPC server on its embedded SQLite store.

Options (each also PALIMPSEST_<NAME> in the environment, e.g. PALIMPSEST_LISTEN):
${SERVE_OPTIONS.map((o) => `  --${o.flag}${o.boolean ? '' : ' VALUE'}\n      ${o.help}`).join('\n')}

Example:
  palimpsest serve --listen 127.0.0.1:50051 --db ./sessions.db --durability full
`;

async function serve(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(SERVE_HELP);
    return 0;
  }
  const config = parseServeArgs(argv, process.env);
  const server = await startServer(config);
  process.stdout.write(`palimpsest listening on ${server.address}\n`);
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      void server.shutdown().then(resolve);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  return 0;
}

/** Runs the CLI; resolves with the exit status. */
export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    if (cmd === 'serve') return await serve(rest);
    process.stderr.write(`error: unknown command ${JSON.stringify(cmd ?? '')}; try palimpsest serve --help\n`);
    return 2;
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`error: ${e.message}\n`);
      return 2;
    }
    process.stderr.write(`error: ${(e as Error).message}\n`);
    return 1;
  }
}
