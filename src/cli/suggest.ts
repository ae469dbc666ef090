/**
 * "Did you mean": the closest known name to a mistyped one (Damerau-Levenshtein, optimal string
 * alignment), within a distance that still reads as a typo.
 */

/** Edit distance with adjacent transpositions counted as one edit. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The known name closest to `input` (a prefix match wins), or undefined when none is close. */
export function closest(input: string, known: readonly string[]): string | undefined {
  const prefixed = known.filter((k) => input.length >= 2 && k.startsWith(input));
  if (prefixed.length === 1) return prefixed[0];
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const dist = editDistance(input, k);
    if (dist < bestD) { best = k; bestD = dist; }
  }
  return bestD <= Math.max(1, Math.floor(input.length / 3)) ? best : undefined;
}

/** "; did you mean X?" or ''. */
export function didYouMean(input: string, known: readonly string[], prefix = ''): string {
  const c = closest(input, known);
  return c === undefined ? '' : `; did you mean ${prefix}${c}?`;
}
