import { expect, it } from 'vitest';
import { PRESETS, runBench } from '../../bench/harness.js';
import { renderReport } from '../../bench/report.js';

/*
 * The benchmark harness in its quickest mode (one round of one second, small requests only: the SDK's and the independent harness's),
 * so that `npm run bench` cannot rot unnoticed. It checks that numbers come out, never what
 * they are: timings on a shared CI machine mean nothing.
 */

it('runs the floor, a fresh gateway and one that overflowed before, and produces figures for each', async () => {
  const result = await runBench({ ...PRESETS.smoke, log: () => {} });
  expect(result.scenarios.map((s) => s.name)).toEqual(['small', 'bare']);
  for (const scenario of result.scenarios)
    for (const target of ['floor', 'gateway', 'overflowed'] as const) {
      const [run] = scenario.runs[target];
      expect(run.load!.responses).toBeGreaterThan(0);
      expect(run.load!.failures).toBe(0);
      for (const figure of [run.load!.rps, run.load!.p50Ms, run.load!.p99Ms, run.cpuUsPerRequest]) {
        expect(Number.isFinite(figure) && figure > 0).toBe(true);
      }
    }
  expect(result.peakRssBytes.gateway).toBeGreaterThan(0);
  expect(result.peakRssBytes.overflowed).toBeGreaterThan(0);
  const { markdown } = renderReport(result);
  expect(markdown).toContain('| throughput (req/s) |');
  expect(markdown).toContain('Small requests as the independent harness sends them (2 headers, 191 B body');
}, 60_000);
