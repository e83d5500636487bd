// `npm start`: builds dist/ when a source is newer than it (and TypeScript, a dev dependency, is
// there to build it), then runs the gateway in this same process, so a signal npm passes on
// reaches it. Plain JavaScript: it runs with production dependencies only.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const main = join(root, 'dist', 'main.js');
const tsc = join(root, 'node_modules', '.bin', 'tsc');

/** The newest modification time of the build's inputs: src/**\/*.ts and tsconfig.json. */
function newestSource() {
  const sources = existsSync(join(root, 'src'))
    ? readdirSync(join(root, 'src'), { recursive: true })
        .filter((f) => String(f).endsWith('.ts'))
        .map((f) => join(root, 'src', String(f)))
    : [];
  return Math.max(0, ...[...sources, join(root, 'tsconfig.json')].filter((f) => existsSync(f)).map((f) => statSync(f).mtimeMs));
}

const built = existsSync(main) ? statSync(main).mtimeMs : 0;
const stale = newestSource() > built;
if (stale && existsSync(tsc)) {
  const build = spawnSync(tsc, ['-p', join(root, 'tsconfig.json')], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) {
    process.stderr.write('npm start: the build failed (tsc above); nothing was started\n');
    process.exit(build.status ?? 1);
  }
} else if (!built) {
  process.stderr.write(
    'npm start: no dist/ to run, and TypeScript (a dev dependency) is not installed to build it: run npm ci, then npm start\n',
  );
  process.exit(1);
} else if (stale) {
  process.stderr.write('npm start: warning: src/ is newer than dist/ and TypeScript is not installed, so the older dist/ runs\n');
}
await import(pathToFileURL(main).href);
