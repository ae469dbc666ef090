/**
 * Just enough Markdown for the docs tests: headings and their GitHub anchors, links, code spans
 * and fenced blocks, tables between marker comments.
 */

/** The text without its fenced code blocks (their lines become empty, so line numbers hold). */
export function withoutFences(md: string): string {
  let inFence = false;
  return md
    .split('\n')
    .map((line) => {
      if (/^\s*```/.test(line)) {
        inFence = !inFence;
        return '';
      }
      return inFence ? '' : line;
    })
    .join('\n');
}

/** The fenced code blocks of a language (`sh`, ...), each as its lines. */
export function fencedBlocks(md: string, lang: string): string[][] {
  const blocks: string[][] = [];
  let current: string[] | undefined;
  let inFence = false;
  for (const line of md.split('\n')) {
    const fence = /^\s*```(\S*)/.exec(line);
    if (fence) {
      if (!inFence) current = fence[1] === lang ? [] : undefined;
      else if (current) blocks.push(current);
      inFence = !inFence;
      continue;
    }
    if (inFence && current) current.push(line);
  }
  return blocks;
}

/** GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor a document defines (duplicates numbered as GitHub numbers them). */
export function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of withoutFences(md).split('\n')) {
    const h = /^#{1,6}\s+(.*)$/.exec(line);
    if (!h) continue;
    const base = slug(h[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Targets of inline links `[text](target)` and images, outside code. */
export function linkTargets(md: string): string[] {
  const text = withoutFences(md).replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/!?\[[^\]\n]*\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

/** The contents of inline code spans, outside fenced blocks. */
export function codeSpans(md: string): string[] {
  return [...withoutFences(md).matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
}

/** The lines between `<!-- NAME:begin -->` and `<!-- NAME:end -->`; throws when the markers are missing. */
export function between(md: string, name: string): string[] {
  const lines = md.split('\n');
  const begin = lines.findIndex((l) => l.trim() === `<!-- ${name}:begin -->`);
  const end = lines.findIndex((l) => l.trim() === `<!-- ${name}:end -->`);
  if (begin < 0 || end < begin) throw new Error(`markers <!-- ${name}:begin/end --> not found`);
  return lines.slice(begin + 1, end);
}

/** The section under a heading (up to the next heading of the same or a higher level). */
export function section(md: string, heading: string): string {
  const lines = md.split('\n');
  const bare = withoutFences(md).split('\n'); // headings are never inside code blocks
  const start = bare.findIndex((l) => /^#{1,6}\s/.test(l) && l.replace(/^#+\s+/, '') === heading);
  if (start < 0) throw new Error(`heading ${JSON.stringify(heading)} not found`);
  const level = /^#+/.exec(bare[start]!)![0].length;
  let end = lines.length;
  for (let i = start + 1; i < bare.length; i++) {
    const m = /^(#{1,6})\s/.exec(bare[i]!);
    if (m && m[1]!.length <= level) {
      end = i;
      break;
    }
  }
  return lines.slice(start + 1, end).join('\n');
}
