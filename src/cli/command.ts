/**
 * What a client command is: its declarative spec (options, help, examples) plus a `run` that
 * gets a connected client, the parsed arguments and the output.
 */
import type { Readable } from 'node:stream';
import type { Args, CommandSpec } from './args.js';
import type { Rpc } from './client.js';
import type { Output } from './output.js';

/** Everything a command's `run` may use. */
export interface CommandContext {
  readonly args: Args;
  readonly out: Output;
  readonly rpc: Rpc;
  readonly stdin: Readable;
  readonly env: NodeJS.ProcessEnv;
}

/** A client command: spec + behaviour. Resolves with the exit status (default 0). */
export interface Command extends CommandSpec {
  run(ctx: CommandContext): Promise<number | void>;
}

/** Drains a paginated list RPC, calling `each` per page until no token is left or `limit` is reached. */
export async function paginate<T>(
  limit: number | undefined,
  fetch: (pageSize: number, pageToken: string) => Promise<{ items: readonly T[]; nextPageToken: string }>,
  each: (items: readonly T[]) => Promise<void>,
): Promise<void> {
  let remaining = limit ?? Number.POSITIVE_INFINITY;
  let token = '';
  do {
    // 0 = the server's default page size; ask for less only when fewer are wanted.
    const page = await fetch(remaining <= 100 ? remaining : 0, token);
    const items = page.items.slice(0, remaining);
    await each(items);
    remaining -= items.length;
    token = page.nextPageToken;
  } while (token !== '' && remaining > 0);
}
