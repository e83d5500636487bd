import { expect, it } from 'vitest';
import { formatReport, runSoak, soakPassed } from '../../bench/soak.js';

/*
 * The soak of `npm run soak`, short: ~6 s of mixed traffic through the built gateway in a child
 * process, against the bench's fake upstream (streaming and not, ~10% rescued, some clients
 * aborting), then the same checks. dist/ is the one `pretest` built.
 */
it('survives ~6 s of mixed traffic: nothing unexpected, heap and handles back at rest', async () => {
  const report = await runSoak({ durationMs: 6_000, phases: 2, concurrency: 24, maxRequests: 0, warmupRequests: 100 });
  const text = formatReport(report);
  console.log(text);
  expect(report.unexpected, text).toEqual({});
  expect(report.requests).toBeGreaterThan(200);
  for (const kind of ['chat', 'stream', 'rescue', 'rescue_stream', 'abort_mid_stream', 'abort_before_headers', 'bad_json', 'models']) {
    expect(report.byKind[kind] ?? 0, kind).toBeGreaterThan(0);
  }
  expect(report.upstreamLeftOpen).toBe(0);
  expect(report.gatewayLog.error ?? 0, text).toBe(0);
  expect(report.settled, text).toEqual({ heap: true, handles: true });
  expect(soakPassed(report)).toBe(true);
}, 60_000);
