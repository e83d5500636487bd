/** The sum of a metric's samples in a Prometheus text exposition over every series whose labels include `where`. */
export function total(metrics: string, name: string, where: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of metrics.split('\n')) {
    // A label value may hold a brace (the route `/v1beta/models/{model}:generateContent`).
    const m = /^([a-zA-Z_:][\w:]*)(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(where).every(([k, v]) => labels[k] === v)) sum += Number(m[3]);
  }
  return sum;
}
