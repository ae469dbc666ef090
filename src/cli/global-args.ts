/**
 * Global options before the command (`palimpsest --addr h:1 --json sessions`), as kubectl and
 * temporal accept them: they are moved after the command, where its parser reads them with the
 * command's own options.
 */
import { GLOBAL_OPTIONS, UsageError } from './args.js';
import { didYouMean } from './suggest.js';

/** `argv` with any global options that precede the command moved after it. */
export function hoistGlobalOptions(argv: readonly string[]): string[] {
  const globals: string[] = [];
  let i = 0;
  while (i < argv.length) {
    const a = argv[i] as string;
    if (!a.startsWith('-') || a === '-' || a === '--help' || a === '-h' || a === '--version' || a === '-V') break;
    const name = a.replace(/^-+/, '').split('=')[0] ?? '';
    const spec = GLOBAL_OPTIONS[name];
    if (!spec || !a.startsWith('--')) {
      throw new UsageError(`unknown option ${a} before the command${didYouMean(name, Object.keys(GLOBAL_OPTIONS), '--')}\nusage: palimpsest [global options] COMMAND [options] (see palimpsest --help)`);
    }
    if (spec.type === 'string' && !a.includes('=')) {
      const value = argv[i + 1];
      if (value === undefined) throw new UsageError(`--${name} needs a value${spec.value ? ` (${spec.value})` : ''}`);
      globals.push(`--${name}=${value}`);
      i += 2;
    } else {
      globals.push(a);
      i += 1;
    }
  }
  return [...argv.slice(i), ...globals];
}
