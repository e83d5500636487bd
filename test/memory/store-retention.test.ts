import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

/*
 * A remembered entry must not keep the request it came from alive. V8's JSON.parse gives strings
 * that are slices of the text it parsed, so an entry holding one line of a request (a trail's
 * first error, an input) would hold the request's whole text for as long as it is remembered. Run
 * in a child with --expose-gc, the built store: the heap after a full collection says what is kept.
 */
const STORE = fileURLToPath(new URL('../../dist/memory/store.js', import.meta.url));

const script = `
const { LocalStore } = await import(${JSON.stringify(STORE)});
const store = new LocalStore(64 * 2 ** 20, 3600);
let text = JSON.stringify({ messages: [{ role: 'tool', content: 'error TS2345 in src/a.ts ' + 'x'.repeat(40 * 2 ** 20) }] });
let request = JSON.parse(text);
let line = request.messages[0].content.slice(0, 24);
await store.remember('s', {
  spanLength: 1, spanDigest: 'd', pinnedOffsets: [], summary: { role: 'user', content: 'summary' }, summaryText: 'summary',
  trail: { changed: [], read: [], commands: [], errors: [line], said: [] },
  summarizedCount: 1, strategy: 'summarize', summarizerCalls: 1, fitBytes: 1000, aimBytes: 500, createdAt: 0,
});
text = request = line = null;
gc();
const [entry] = await store.entries('s');
console.log(JSON.stringify({ heapMb: process.memoryUsage().heapUsed / 2 ** 20, error: entry.trail.errors[0] }));
`;

it('a remembered entry keeps none of the request text it was read from', () => {
  const run = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
  expect(run.status, run.stderr).toBe(0);
  const { heapMb, error } = JSON.parse(run.stdout.trim());
  expect(error).toBe('error TS2345 in src/a.ts');
  // The request's text was 40 MB; what is left is the process's own few megabytes.
  expect(heapMb).toBeLessThan(20);
});
