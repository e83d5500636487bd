/**
 * Case, `_` and `-` are ignored (`api_key` is `apiKey`), then up to one edit per four characters (a swap is one edit), else a candidate
 * containing the name or contained in it (`base_url` -> `url`, `timeout` -> `timeoutMs`) unless `spellingOnly`; undefined if none is close.
 */
export function closest(name: string, candidates: readonly string[], spellingOnly = false): string | undefined {
  const word = normal(name);
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = editDistance(word, normal(candidate));
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  if (best !== undefined && bestDistance <= Math.max(1, Math.floor(word.length / 4))) return best;
  if (spellingOnly) return undefined;
  return candidates.find((candidate) => {
    const other = normal(candidate);
    return Math.min(other.length, word.length) >= 3 && (other.includes(word) || word.includes(other));
  });
}

const normal = (name: string) => name.toLowerCase().replace(/[-_]/g, '');

/** Levenshtein distance with adjacent transpositions (optimal string alignment). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}
