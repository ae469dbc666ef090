/**
 * Argument parsing of the client commands: a declarative spec per command (options, positionals,
 * help, examples) parsed with node:util parseArgs, plus the typed accessors the commands use.
 */
import { parseArgs } from 'node:util';
import { didYouMean } from './suggest.js';

/** A command-line usage error (exit status 2). */
export class UsageError extends Error {}

/** One option of a command. */
export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly help: string;
  /** Placeholder shown in help, e.g. `N`. */
  readonly value?: string;
  readonly short?: string;
  readonly multiple?: boolean;
}

/** One positional argument. */
export interface PositionalSpec {
  readonly name: string;
  readonly optional?: boolean;
}

/** The declarative part of a command: what `--help` shows and what the parser accepts. */
export interface CommandSpec {
  readonly name: string;
  readonly summary: string;
  readonly positionals: readonly PositionalSpec[];
  readonly options: Readonly<Record<string, OptionSpec>>;
  readonly examples: readonly string[];
  /** Longer explanation shown under the usage line. */
  readonly details?: string;
}

/** Options every client command takes. */
export const GLOBAL_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  addr: { type: 'string', value: 'HOST:PORT', help: 'server address (default $PALIMPSEST_ADDR or 127.0.0.1:50051)' },
  json: { type: 'boolean', help: 'machine-readable JSON output (and JSON errors on stderr)' },
  'connect-timeout': { type: 'string', value: 'MS', help: 'how long to wait for the server (default $PALIMPSEST_CONNECT_TIMEOUT or 5000)' },
  token: { type: 'string', value: 'TOKEN', help: 'bearer token sent as `authorization` (default $PALIMPSEST_TOKEN)' },
  'tls-ca': { type: 'string', value: 'FILE', help: 'use TLS, trusting this CA certificate (PEM; default $PALIMPSEST_TLS_CA)' },
  'tls-cert': { type: 'string', value: 'FILE', help: 'client certificate for mutual TLS (PEM; default $PALIMPSEST_TLS_CERT)' },
  'tls-key': { type: 'string', value: 'FILE', help: 'client private key for mutual TLS (PEM; default $PALIMPSEST_TLS_KEY)' },
  context: { type: 'string', value: 'NAME', help: 'connect as the named context says (palimpsest context list; default $PALIMPSEST_CONTEXT, else the current one)' },
  help: { type: 'boolean', short: 'h', help: 'show this help' },
};

/** Short flags of the common options, given to every command that has the option. */
export const SHORT_FLAGS: Readonly<Record<string, string>> = { label: 'l', limit: 'n', type: 't', id: 'i', full: 'f', after: 'a' };

/** The read commands: each takes `-o json|yaml|table`. */
export const READ_COMMANDS: ReadonlySet<string> = new Set(['get', 'sessions', 'events', 'surface', 'messages', 'plan-compaction', 'watch']);

/** `-o/--output` of the read commands. */
export const OUTPUT_OPTION: OptionSpec = { type: 'string', short: 'o', value: 'json|yaml|table', help: 'output format: json (as --json), yaml, or table (for people; the default)' };

/** The output formats of `-o`. */
export const OUTPUT_FORMATS = ['json', 'yaml', 'table'] as const;

/** A command's own options with their short flags, plus `-o` for a read command. */
export function commandOptions(spec: CommandSpec): Record<string, OptionSpec> {
  const own = Object.fromEntries(Object.entries(spec.options).map(([k, o]) => {
    const short = SHORT_FLAGS[k];
    return [k, o.short || !short ? o : { ...o, short }];
  }));
  return READ_COMMANDS.has(spec.name) && !own['output'] ? { output: OUTPUT_OPTION, ...own } : own;
}

/** Parsed arguments with typed accessors. */
export class Args {
  constructor(
    private readonly values: Readonly<Record<string, string | boolean | (string | boolean)[] | undefined>>,
    readonly positionals: readonly string[],
  ) {}

  /** A string option, or undefined. */
  str(name: string): string | undefined {
    const v = this.values[name];
    return typeof v === 'string' ? v : undefined;
  }

  /** A boolean flag. */
  flag(name: string): boolean {
    return this.values[name] === true;
  }

  /** Every value of a repeatable option. */
  list(name: string): string[] {
    const v = this.values[name];
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  }

  /** An integer option (>= min), or undefined. */
  int(name: string, min = 0): number | undefined {
    const v = this.str(name);
    return v === undefined ? undefined : parseInteger(`--${name}`, v, min);
  }

  /** Positional `i` (the spec guarantees required ones are present). */
  pos(i: number): string {
    return this.positionals[i] ?? '';
  }

  /** `--label k=v` pairs (repeatable) as a map. */
  labels(name = 'label'): Record<string, string> {
    const out: Record<string, string> = {};
    for (const kv of this.list(name)) {
      const eq = kv.indexOf('=');
      if (eq <= 0) throw new UsageError(`--${name} must be KEY=VALUE, got ${JSON.stringify(kv)}`);
      out[kv.slice(0, eq)] = kv.slice(eq + 1);
    }
    return out;
  }
}

/** Parses a safe integer >= min or throws a UsageError naming `what`. */
export function parseInteger(what: string, v: string, min = 0): number {
  const n = /^-?\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`${what} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return n;
}

/** Parses `argv` (after the command name) against the command's spec and the global options. */
export function parseCommandArgs(spec: CommandSpec, argv: readonly string[]): Args {
  const options = { ...GLOBAL_OPTIONS, ...commandOptions(spec) };
  // parseArgs calls `--opt -1` ambiguous; a negative number after a value option is its value.
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const next = argv[i + 1];
    if (a.startsWith('--') && options[a.slice(2)]?.type === 'string' && next !== undefined && /^-\d+$/.test(next)) {
      args.push(`${a}=${next}`);
      i++;
    } else args.push(a);
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args,
      options: Object.fromEntries(Object.entries(options).map(([k, o]) => [k, { type: o.type, multiple: o.multiple === true, ...(o.short ? { short: o.short } : {}) }])),
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    throw new UsageError(`${explainParseError(e as Error & { code?: string }, spec, options)}\nusage: ${synopsis(spec)}\n(see palimpsest ${spec.name} --help)`);
  }
  const result = new Args(parsed.values, parsed.positionals);
  if (result.flag('help')) return result;
  const format = result.str('output');
  if (READ_COMMANDS.has(spec.name) && format !== undefined && !(OUTPUT_FORMATS as readonly string[]).includes(format)) {
    throw new UsageError(`-o must be ${OUTPUT_FORMATS.join(', ')}, got ${JSON.stringify(format)}${didYouMean(format, OUTPUT_FORMATS, '')}`);
  }
  const required = spec.positionals.filter((p) => !p.optional).length;
  if (parsed.positionals.length < required) {
    throw new UsageError(`missing ${spec.positionals[parsed.positionals.length]?.name ?? 'argument'}; see palimpsest ${spec.name} --help`);
  }
  if (parsed.positionals.length > spec.positionals.length) {
    throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[spec.positionals.length])}; see palimpsest ${spec.name} --help`);
  }
  return result;
}

/** Our own words for parseArgs' errors (its text talks about its API, not this command). */
function explainParseError(e: Error & { code?: string }, spec: CommandSpec, options: Readonly<Record<string, OptionSpec>>): string {
  // parseArgs names an option with a short flag as '-n, --limit <value>': take the long name.
  const m = /'(?:-[^-' ,], )?(-{1,2}[^' ,]+)/.exec(e.message);
  const given = m?.[1] ?? '';
  const bare = given.replace(/^-+/, '').split('=')[0] ?? '';
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    return `unknown option ${given} for palimpsest ${spec.name}${didYouMean(bare, Object.keys(options), '--')}`;
  }
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const o = options[bare];
    if (o?.type === 'boolean') return `--${bare} is a flag and takes no value`;
    return `--${bare} needs a value${o?.value ? ` (${o.value})` : ''}`;
  }
  return e.message.split('\n')[0] ?? 'invalid arguments';
}

function optionLines(options: Readonly<Record<string, OptionSpec>>): string {
  return Object.entries(options)
    .map(([name, o]) => {
      const flag = `${o.short ? `-${o.short}, ` : ''}--${name}${o.value ? ` ${o.value}` : ''}${o.multiple ? '...' : ''}`;
      return `  ${flag.padEnd(28)} ${o.help}`;
    })
    .join('\n');
}

/** The one-line synopsis of a command. */
export function synopsis(spec: CommandSpec): string {
  const pos = spec.positionals.map((p) => (p.optional ? `[${p.name}]` : p.name));
  const opts = Object.entries(commandOptions(spec)).map(([name, o]) => `[--${name}${o.value ? ` ${o.value}` : ''}]${o.multiple ? '...' : ''}`);
  return ['palimpsest', spec.name, ...pos, ...opts].join(' ');
}

/** The `--help` text of a command. */
export function helpText(spec: CommandSpec): string {
  const parts = [`Usage: ${synopsis(spec)}`, '', spec.summary];
  if (spec.details) parts.push('', spec.details);
  const options = commandOptions(spec);
  if (Object.keys(options).length > 0) parts.push('', 'Options:', optionLines(options));
  parts.push('', 'Common options:', optionLines(GLOBAL_OPTIONS));
  parts.push('', spec.examples.length > 1 ? 'Examples:' : 'Example:', ...spec.examples.map((e) => `  ${e}`), '');
  return parts.join('\n');
}
