import autocannon from 'autocannon';
import { Samples } from './stats.js';

export interface LoadOptions {
  url: string;
  body: string | Buffer;
  headers: Record<string, string>;
  connections: number;
  seconds: number;
  /** Instead of `seconds`: stop after this many requests (a run that always yields answers). */
  requests?: number;
  /** Requests per second over all connections (open loop); unset: as fast as answers come. */
  rate?: number;
}

export interface LoadResult {
  responses: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Connection errors, timeouts and non-2xx answers: any of them spoils the run. */
  failures: number;
}

/**
 * One closed-loop autocannon run. Latencies are recorded from autocannon's per-response event at
 * full precision (its own histogram keeps whole milliseconds only).
 */
export function runLoad(options: LoadOptions): Promise<LoadResult> {
  const latencies = new Samples();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.url,
        method: 'POST',
        headers: options.headers,
        body: options.body,
        connections: options.connections,
        pipelining: 1,
        ...(options.requests ? { amount: options.requests } : { duration: options.seconds }),
        timeout: 10,
        ...(options.rate ? { overallRate: options.rate } : {}),
      },
      (err, result) => {
        if (err) return reject(err);
        resolve({
          responses: result.requests.total,
          rps: result.requests.total / result.duration,
          p50Ms: latencies.percentile(50),
          p99Ms: latencies.percentile(99),
          failures: result.errors + result.timeouts + result.non2xx,
        });
      },
    );
    instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status < 300) latencies.push(ms);
    });
  });
}
