import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';

/*
 * The bench measures the gateway as it ships: tsc's output in dist/, run by plain Node. (Under
 * tsx, esbuild's keepNames wraps every named closure in a defineProperty call, a cost the
 * production build does not have.) Modules are loaded by path, typed from their sources.
 */

const ROOT = new URL('../', import.meta.url);

/** Compiles src/ to dist/ (`npm run build`), so that a fresh clone and a stale dist/ both work. */
export function buildDist(): void {
  execFileSync(fileURLToPath(new URL('node_modules/.bin/tsc', ROOT)), ['-p', 'tsconfig.json'], {
    cwd: fileURLToPath(ROOT),
    stdio: 'inherit',
  });
}

/** Imports `dist/<path>.js`: `importDist<typeof import('../src/server.js')>('server')`. */
export async function importDist<T>(path: string): Promise<T> {
  return (await import(pathToFileURL(fileURLToPath(new URL(`dist/${path}.js`, ROOT))).href)) as T;
}
