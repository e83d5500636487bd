/*
 * The three series every request updates: requests by route, method and status class, and two
 * latency histograms by route. prom-client validates the label object and builds a key string
 * from it on every call; for a small request those three calls cost about 14,000 instructions of
 * the gateway's ~370,000 (callgrind, main thread). These keep each series in a Map under a key the
 * caller already has (the route), and hand prom-client's registry the same values its own
 * Counter and Histogram would, so the exposition does not change: same names, labels, order of
 * first appearance, cumulative buckets, `_sum` and `_count`.
 */

interface MetricValue {
  labels: Record<string, string | number>;
  /** Labels of the series the value belongs to, rendered after its own (prom-client's histogram shape). */
  sharedLabels?: Record<string, string>;
  value: number;
  metricName?: string;
  /** Always null: the gateway records no exemplars (prom-client's buckets say so the same way). */
  exemplar?: null;
}

/** What prom-client's Registry reads of a metric (its `registerMetric`, `metrics()`, `resetMetrics()`). */
export interface RegistryMetric {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; values: MetricValue[]; aggregator: string }>;
  reset(): void;
}

interface CounterSeries {
  labels: { route: string; method: string; status_class: string; upstream?: string };
  value: number;
}

const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx', '6xx', '7xx', '8xx', '9xx'];

/** What both metrics share: a name and help for the registry, and their series under a key, in order of first appearance. */
abstract class KeyedSeries<S> {
  readonly aggregator = 'sum';
  protected readonly series = new Map<string, S>();

  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  reset(): void {
    this.series.clear();
  }
}

/** `gateway_http_requests_total{route, method, status_class, upstream}`; `upstream` absent for the gateway's own answers. */
export class RequestCounter extends KeyedSeries<CounterSeries> implements RegistryMetric {
  readonly type = 'counter';

  inc(route: string, method: string, status: number, upstream?: string): void {
    const statusClass = STATUS_CLASSES[Math.floor(status / 100)] ?? `${Math.floor(status / 100)}xx`;
    const key = `${route} ${method} ${statusClass} ${upstream ?? ''}`;
    const series = this.series.get(key);
    if (series) series.value += 1;
    else this.series.set(key, { labels: upstream === undefined ? { route, method, status_class: statusClass } : { route, method, status_class: statusClass, upstream }, value: 1 });
  }

  async get() {
    const values = [...this.series.values()].map((s) => ({ labels: { ...s.labels }, value: s.value }));
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}

interface HistogramSeries {
  route: string;
  upstream?: string;
  /** Observations per bucket, not cumulative; the last one is +Inf. */
  counts: Float64Array;
  sum: number;
  count: number;
}

/** A histogram by `route`, and `upstream` where one is given. */
export class RouteHistogram extends KeyedSeries<HistogramSeries> implements RegistryMetric {
  readonly type = 'histogram';

  constructor(
    name: string,
    help: string,
    private readonly upperBounds: readonly number[],
  ) {
    super(name, help);
  }

  observe(route: string, value: number, upstream?: string): void {
    const key = upstream === undefined ? route : `${route} ${upstream}`;
    let series = this.series.get(key);
    if (!series) {
      series = { route, upstream, counts: new Float64Array(this.upperBounds.length + 1), sum: 0, count: 0 };
      this.series.set(key, series);
    }
    let bucket = 0;
    while (bucket < this.upperBounds.length && value > this.upperBounds[bucket]) bucket++;
    series.counts[bucket] += 1;
    series.sum += value;
    series.count += 1;
  }

  /** What the registry renders: each bucket's `le`, and the series' own labels shared, as prom-client gives them. */
  async getForPromString() {
    const values: MetricValue[] = [];
    for (const s of this.series.values()) {
      const shared: Record<string, string> = s.upstream === undefined ? { route: s.route } : { route: s.route, upstream: s.upstream };
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += s.counts[i];
        values.push({ labels: { le }, sharedLabels: shared, value: cumulative, metricName: `${this.name}_bucket`, exemplar: null });
      });
      values.push(
        { labels: { le: '+Inf' }, sharedLabels: shared, value: s.count, metricName: `${this.name}_bucket`, exemplar: null },
        { labels: {}, sharedLabels: shared, value: s.sum, metricName: `${this.name}_sum` },
        { labels: {}, sharedLabels: shared, value: s.count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** The same values with the shared labels folded into each one's own (JSON, aggregation). */
  async get() {
    const data = await this.getForPromString();
    return { ...data, values: data.values.map(({ sharedLabels, ...v }) => ({ ...v, labels: { ...v.labels, ...sharedLabels } })) };
  }
}
