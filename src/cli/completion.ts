/**
 * `palimpsest completion bash|zsh|fish`: shell completion of the commands, their options (long
 * and short), `-o` formats, context names and the `context` / `completion` subcommands, generated
 * from the same command table the parser uses.
 */
import { commandOptions, GLOBAL_OPTIONS, OUTPUT_FORMATS, type OptionSpec } from './args.js';
import { EXIT } from './client.js';
import { COMMANDS } from './commands/index.js';
import { SERVE_OPTIONS } from './serve.js';

interface Io {
  readonly stdout: { write(s: string): unknown };
  readonly stderr: { write(s: string): unknown };
}

/** One completable command: name, summary, options (name -> spec), subcommands. */
interface Entry {
  readonly name: string;
  readonly summary: string;
  readonly options: Readonly<Record<string, OptionSpec>>;
  readonly subcommands?: readonly string[];
}

const flag = (help: string, type: 'string' | 'boolean' = 'string'): OptionSpec => ({ type, help });

function entries(): Entry[] {
  const tls = { 'tls-ca': GLOBAL_OPTIONS['tls-ca']!, 'tls-cert': GLOBAL_OPTIONS['tls-cert']!, 'tls-key': GLOBAL_OPTIONS['tls-key']! };
  return [
    { name: 'serve', summary: 'Starts the gRPC server.', options: Object.fromEntries(SERVE_OPTIONS.map((o) => [o.flag, flag(o.help, o.boolean ? 'boolean' : 'string')])) },
    { name: 'backup', summary: 'Copies a database file online, verified.', options: { db: flag('database file'), to: flag('backup file'), json: GLOBAL_OPTIONS['json']! } },
    { name: 'reindex', summary: 'Rebuilds the search index, online.', options: { db: flag('database file or PostgreSQL URL'), schema: flag('PostgreSQL schema'), json: GLOBAL_OPTIONS['json']! } },
    {
      name: 'verify', summary: 'Checks every session of a database file or a server.',
      options: { db: flag('database file'), addr: GLOBAL_OPTIONS['addr']!, token: GLOBAL_OPTIONS['token']!, ...tls, json: GLOBAL_OPTIONS['json']! },
    },
    {
      name: 'context', summary: 'Named connections: add, use, list, remove.', subcommands: ['add', 'use', 'list', 'remove'],
      options: { addr: GLOBAL_OPTIONS['addr']!, ...tls, 'token-file': flag('file holding the bearer token'), use: flag('make it the current context', 'boolean'), output: { ...flag('output format'), short: 'o' } },
    },
    { name: 'completion', summary: 'Prints shell completion.', subcommands: ['bash', 'zsh', 'fish'], options: {} },
    ...COMMANDS.map((c) => ({ name: c.name, summary: c.summary, options: { ...commandOptions(c), ...GLOBAL_OPTIONS } })),
  ];
}

function words(o: Readonly<Record<string, OptionSpec>>): string[] {
  return Object.entries(o).flatMap(([name, spec]) => [`--${name}`, ...(spec.short ? [`-${spec.short}`] : [])]);
}

/** Options whose value is a context name / an output format (completed specially). */
const CONTEXT_NAMES = `palimpsest context list -o json 2>/dev/null | grep -o '"name":"[^"]*"' | cut -d'"' -f4`;

function bash(list: readonly Entry[]): string {
  const cases = list.map((e) => `    ${e.name}) opts="${words(e.options).join(' ')}"${e.subcommands ? `; subs="${e.subcommands.join(' ')}"` : ''} ;;`).join('\n');
  return `# palimpsest completion for bash. Load with: source <(palimpsest completion bash)
_palimpsest() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} cmd=\${COMP_WORDS[1]} opts="" subs=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${list.map((e) => e.name).join(' ')} --help --version" -- "$cur"))
    return
  fi
  case "$prev" in
    -o|--output) if [ "$cmd" != export ]; then COMPREPLY=($(compgen -W "${OUTPUT_FORMATS.join(' ')}" -- "$cur")); return; fi ;;
    --context) COMPREPLY=($(compgen -W "$(${CONTEXT_NAMES})" -- "$cur")); return ;;
  esac
  case "$cmd" in
${cases}
  esac
  if [ -n "$subs" ] && [ "$COMP_CWORD" -eq 2 ]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  elif [ "$cmd" = context ] && [ "$COMP_CWORD" -eq 3 ] && [[ "$prev" =~ ^(use|remove|add)$ ]] && [[ "$cur" != -* ]]; then
    COMPREPLY=($(compgen -W "$(${CONTEXT_NAMES})" -- "$cur"))
  elif [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  fi
}
complete -o default -F _palimpsest palimpsest
`;
}

function zsh(list: readonly Entry[]): string {
  const desc = (s: string) => s.replace(/[\\':]/g, (ch) => (ch === "'" ? "'\\''" : `\\${ch}`));
  const cases = list.map((e) => `    ${e.name}) opts=(${words(e.options).join(' ')})${e.subcommands ? `; subs=(${e.subcommands.join(' ')})` : ''} ;;`).join('\n');
  return `#compdef palimpsest
# palimpsest completion for zsh. Load with: source <(palimpsest completion zsh)
# (after compinit), or save as _palimpsest in a directory of $fpath.
_palimpsest() {
  local -a cmds opts subs
  cmds=(
${list.map((e) => `    '${e.name}:${desc(e.summary)}'`).join('\n')}
  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'palimpsest command' cmds
    return
  fi
  case \${words[CURRENT-1]} in
    -o|--output) if [[ \${words[2]} != export ]]; then compadd -- ${OUTPUT_FORMATS.join(' ')}; return; fi ;;
    --context) compadd -- \${(f)"$(${CONTEXT_NAMES})"}; return ;;
  esac
  case \${words[2]} in
${cases}
  esac
  if (( CURRENT == 3 )) && (( \${#subs} )); then
    compadd -- $subs
  elif [[ \${words[2]} == context ]] && (( CURRENT == 4 )) && [[ $PREFIX != -* ]]; then
    compadd -- \${(f)"$(${CONTEXT_NAMES})"}
  elif [[ $PREFIX == -* ]]; then
    compadd -- $opts
  else
    _files
  fi
}
compdef _palimpsest palimpsest
`;
}

function fish(list: readonly Entry[]): string {
  const q = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  const lines = [
    '# palimpsest completion for fish. Load with: palimpsest completion fish | source',
    '# (or save as ~/.config/fish/completions/palimpsest.fish)',
    'complete -c palimpsest -e',
    ...list.map((e) => `complete -c palimpsest -f -n __fish_use_subcommand -a ${e.name} -d ${q(e.summary)}`),
  ];
  for (const e of list) {
    const when = `'__fish_seen_subcommand_from ${e.name}'`;
    if (e.subcommands) lines.push(`complete -c palimpsest -f -n ${when} -a ${q(e.subcommands.join(' '))}`);
    for (const [name, o] of Object.entries(e.options)) {
      const values = name === 'output' && e.name !== 'export' ? ` -x -a ${q(OUTPUT_FORMATS.join(' '))}`
        : name === 'context' ? ` -x -a '(${CONTEXT_NAMES.replace(/'/g, "\\'")})'`
          : o.type === 'string' ? ' -r' : '';
      lines.push(`complete -c palimpsest -n ${when} -l ${name}${o.short ? ` -s ${o.short}` : ''}${values} -d ${q(o.help.split(' (')[0] ?? o.help)}`);
    }
  }
  return lines.join('\n') + '\n';
}

const HELP = `Usage: palimpsest completion bash|zsh|fish

Prints a completion script for the shell: commands, options (long and short), -o formats and
context names.

  bash   source <(palimpsest completion bash)            (add it to ~/.bashrc)
  zsh    source <(palimpsest completion zsh)             (after compinit, in ~/.zshrc)
  fish   palimpsest completion fish | source              (or > ~/.config/fish/completions/palimpsest.fish)
`;

/** Runs `palimpsest completion SHELL`. */
export function completion(argv: string[], io: Io): number {
  const [shell, extra] = argv;
  if (shell === '--help' || shell === '-h') {
    io.stdout.write(HELP);
    return EXIT.OK;
  }
  const make = { bash, zsh, fish }[shell as 'bash' | 'zsh' | 'fish'];
  if (!make || extra !== undefined) {
    io.stderr.write(`error: USAGE: ${shell === undefined ? 'name a shell' : `unknown shell ${JSON.stringify(shell)}`}: palimpsest completion bash|zsh|fish\n`);
    return EXIT.USAGE;
  }
  io.stdout.write(make(entries()));
  return EXIT.OK;
}
