// Preloaded with `node --import` into a process whose event loop bench/rescue-profile.ts watches:
// every 500 ms, a line "epoch-ms p50-ms p99-ms max-ms" of the loop's delay appended to ELD_FILE.
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.ELD_FILE;
if (file) {
  const delay = monitorEventLoopDelay({ resolution: 2 });
  delay.enable();
  setInterval(() => {
    const ms = (ns) => (ns / 1e6).toFixed(2);
    appendFileSync(file, `${Date.now()} ${ms(delay.percentile(50))} ${ms(delay.percentile(99))} ${ms(delay.max)}\n`);
    delay.reset();
  }, 500).unref();
}
