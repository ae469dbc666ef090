/**
 * The CLI's gRPC connection (address, TLS, bearer token, a short connect deadline) and the
 * mapping of every failure to an exit status and the printed error shape.
 */
import { isLoopback } from '../server/tls.js';
import { readFileSync } from 'node:fs';
import { credentials, Metadata, status, type CallOptions, type ClientUnaryCall, type ServiceError } from '@grpc/grpc-js';
import { SessionServiceClient } from '../../gen/palimpsest/v1/service.js';
import { decodeError } from '../client/error-details.js';
import { DomainError } from '../domain/errors.js';
import { parseInteger, UsageError, type Args } from './args.js';
import { activeContext, contextToken } from './contexts-file.js';
import type { Output } from './output.js';

/** Exit statuses. */
export const EXIT = { OK: 0, REJECTED: 1, USAGE: 2, UNREACHABLE: 3 } as const;

/** The default server address. */
export const DEFAULT_ADDR = '127.0.0.1:50051';

/** How to reach the server. */
export interface ConnectOptions {
  readonly addr: string;
  readonly connectTimeoutMs: number;
  readonly token: string | undefined;
  readonly tlsCa: string | undefined;
  readonly tlsCert: string | undefined;
  readonly tlsKey: string | undefined;
}

/**
 * Connection options: each flag, else (with `--context NAME`) that context's value, else its
 * PALIMPSEST_* variable, else the context of $PALIMPSEST_CONTEXT or the current one, else the
 * default.
 */
export function connectOptions(args: Args, env: NodeJS.ProcessEnv): ConnectOptions {
  const flagTimeout = args.str('connect-timeout');
  const timeout = flagTimeout ?? env['PALIMPSEST_CONNECT_TIMEOUT'];
  // A bad value names where it came from: the flag, or the variable the user may have forgotten.
  const timeoutSource = flagTimeout !== undefined ? '--connect-timeout' : 'PALIMPSEST_CONNECT_TIMEOUT (the environment variable for --connect-timeout)';
  const active = activeContext(args.str('context'), env);
  const ctx = active?.context;
  const pick = (flag: string | undefined, envName: string, fromContext: () => string | undefined): string | undefined => {
    if (flag) return flag;
    if (active?.explicit) return fromContext() || env[envName] || undefined;
    return env[envName] || fromContext() || undefined;
  };
  return {
    addr: pick(args.str('addr'), 'PALIMPSEST_ADDR', () => ctx?.addr) ?? DEFAULT_ADDR,
    connectTimeoutMs: timeout ? parseInteger(timeoutSource, timeout, 1) : 5000,
    token: pick(args.str('token'), 'PALIMPSEST_TOKEN', () => (ctx ? contextToken(ctx) : undefined)),
    tlsCa: pick(args.str('tls-ca'), 'PALIMPSEST_TLS_CA', () => ctx?.tlsCa),
    tlsCert: pick(args.str('tls-cert'), 'PALIMPSEST_TLS_CERT', () => ctx?.tlsCert),
    tlsKey: pick(args.str('tls-key'), 'PALIMPSEST_TLS_KEY', () => ctx?.tlsKey),
  };
}

/** The server could not be reached within the connect deadline. */
export class UnreachableError extends Error {}

type UnaryMethod<Req, Res> = (req: Req, md: Metadata, options: Partial<CallOptions>, cb: (err: ServiceError | null, res: Res) => void) => ClientUnaryCall;

/** A connected SessionService client that attaches the caller's metadata to every call. */
export class Rpc {
  private constructor(
    readonly client: SessionServiceClient,
    private readonly token: string | undefined,
  ) {}

  /** Dials `opts.addr` and waits until the channel is ready (UnreachableError after the deadline). */
  static async connect(opts: ConnectOptions): Promise<Rpc> {
    if ((opts.tlsCert === undefined) !== (opts.tlsKey === undefined)) throw new UsageError('--tls-cert and --tls-key go together');
    const tls = Boolean(opts.tlsCa || opts.tlsCert);
    const host = opts.addr.slice(0, Math.max(0, opts.addr.lastIndexOf(':'))) || opts.addr;
    if (opts.token && !tls && !isLoopback(host)) {
      // Same rule as the server's: credentials never cross a network in plaintext.
      throw new UsageError(`refusing to send a bearer token to ${opts.addr} without TLS; pass --tls-ca (the server's CA) or use a loopback address`);
    }
    const pem = (file: string | undefined) => (file === undefined ? null : readFileSync(file));
    const creds = opts.tlsCa || opts.tlsCert
      ? credentials.createSsl(pem(opts.tlsCa), pem(opts.tlsKey), pem(opts.tlsCert))
      : credentials.createInsecure();
    const client = new SessionServiceClient(opts.addr, creds, { 'grpc.max_receive_message_length': -1 });
    try {
      await new Promise<void>((resolve, reject) => {
        client.waitForReady(Date.now() + opts.connectTimeoutMs, (err) => (err ? reject(err) : resolve()));
      });
    } catch (e) {
      client.close();
      throw new UnreachableError(`cannot reach the server at ${opts.addr} within ${opts.connectTimeoutMs} ms (${(e as Error).message}); is \`palimpsest serve\` running? (--addr or PALIMPSEST_ADDR)`);
    }
    return new Rpc(client, opts.token);
  }

  /** Fresh call metadata (the bearer token, when given). */
  metadata(): Metadata {
    const md = new Metadata();
    if (this.token) md.set('authorization', `Bearer ${this.token}`);
    return md;
  }

  /** Calls a unary method: `await rpc.unary(rpc.client.getSession, { sessionId })`. */
  unary<Req, Res>(method: UnaryMethod<Req, Res>, req: Req): Promise<Res> {
    return new Promise((resolve, reject) => {
      method.call(this.client, req, this.metadata(), {}, (err, res) => (err ? reject(err) : resolve(res)));
    });
  }

  close(): void {
    this.client.close();
  }
}

/** A failure as printed: exit status plus the JSON error shape. */
export interface Failure {
  readonly exit: number;
  readonly code: string;
  readonly reason: string;
  readonly message: string;
  readonly metadata: Record<string, string>;
}

function isServiceError(e: unknown): e is ServiceError {
  return e instanceof Error && typeof (e as Partial<ServiceError>).code === 'number' && 'metadata' in e;
}

/** Classifies any thrown value. */
export function toFailure(e: unknown): Failure {
  if (e instanceof UsageError) return { exit: EXIT.USAGE, code: 'INVALID_ARGUMENT', reason: 'USAGE', message: e.message, metadata: {} };
  if (e instanceof UnreachableError) return { exit: EXIT.UNREACHABLE, code: 'UNAVAILABLE', reason: 'UNAVAILABLE', message: e.message, metadata: {} };
  // Refused before sending (an envelope the proto cannot carry): the same reasons as the server.
  if (e instanceof DomainError) return { exit: EXIT.REJECTED, code: 'INVALID_ARGUMENT', reason: e.reason, message: e.message, metadata: { ...e.metadata } };
  if (isServiceError(e)) {
    const d = decodeError(e);
    const code = status[d.code] ?? String(d.code);
    return { exit: d.code === status.UNAVAILABLE ? EXIT.UNREACHABLE : EXIT.REJECTED, code, reason: d.reason || code, message: d.message, metadata: d.metadata };
  }
  const errno = (e as NodeJS.ErrnoException | undefined)?.code;
  if (typeof errno === 'string') return { exit: EXIT.USAGE, code: 'INVALID_ARGUMENT', reason: errno, message: (e as Error).message.replace(`${errno}: `, ''), metadata: {} };
  return { exit: EXIT.REJECTED, code: 'UNKNOWN', reason: 'INTERNAL', message: e instanceof Error ? e.message : String(e), metadata: {} };
}

/** Prints a failure on stderr: `error: REASON: message`, or one JSON object with --json. */
export function reportFailure(f: Failure, out: Output): void {
  if (out.json) {
    out.stderr.write(JSON.stringify({ code: f.code, reason: f.reason, message: f.message, metadata: f.metadata }) + '\n');
  } else {
    out.stderr.write(`${out.errStyle.red('error')}: ${f.reason}: ${f.message}\n`);
  }
}
