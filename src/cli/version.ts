/** The package version (package.json), for `palimpsest --version`. */
import { readFileSync } from 'node:fs';

function read(): string {
  // src/cli/version.ts and dist/src/cli/version.js are both three levels below package.json.
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'palimpsest' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // try the next location
    }
  }
  return 'unknown';
}

/** e.g. "0.1.0". */
export const VERSION = read();
