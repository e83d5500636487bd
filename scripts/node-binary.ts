// A Node.js binary of a given major version, from the npm registry (the `node-<os>-<arch>`
// packages carry the official build as bin/node), for machines that reach the npm registry but
// not nodejs.org or an image registry. .ci/run runs the test suite a second time with it, and
// scripts/check-image.ts puts it into the image's base, so both use the Node the Dockerfile names.
//
// Usage: npx tsx scripts/node-binary.ts [26]   prints the folder whose bin/node is the newest 26.x
//        (without a version: the major the Dockerfile's `ARG NODE_VERSION` names)
//
// Unpacked once per version under the temp folder, then reused; offline, the newest one unpacked
// before is used.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE = `node-${process.platform}-${process.arch}`;
const CACHE = join(tmpdir(), 'compaction-gateway-node');
const NPM_TIMEOUT_MS = 5 * 60_000;

export interface NodeBinary {
  /** x.y.z, without the `v`. */
  version: string;
  /** The folder whose bin/node is that version. */
  dir: string;
}

/** The major version the Dockerfile builds on (`ARG NODE_VERSION=26`). */
export function dockerfileNodeMajor(dockerfile: string): string {
  const major = /^ARG NODE_VERSION=(\d+)\s*$/m.exec(dockerfile)?.[1];
  if (!major) throw new Error('the Dockerfile has no `ARG NODE_VERSION=<major>` line');
  return major;
}

/** Runs npm to its end (bounded); throws with what it said on a non-zero exit. */
export function npm(args: string[], cwd: string = CACHE): string {
  const result = spawnSync('npm', args, { cwd, encoding: 'utf8', timeout: NPM_TIMEOUT_MS });
  if (result.status !== 0) {
    const said = (result.stderr || result.stdout || result.error?.message || '').trim().split('\n').slice(-5).join('\n');
    throw new Error(`npm ${args.join(' ')} failed (${result.signal ?? `exit ${result.status}`}): ${said}`);
  }
  return result.stdout;
}

/** Downloads a registry package's tarball (through npm's cache) into `dir`; returns its path. */
export function packFromRegistry(spec: string, dir: string): string {
  mkdirSync(dir, { recursive: true });
  const name = npm(['pack', spec, '--pack-destination', dir, '--silent', '--no-audit', '--no-fund'], dir).trim().split('\n').at(-1);
  if (!name) throw new Error(`npm pack ${spec} named no tarball`);
  return join(dir, name);
}

const byVersion = (a: string, b: string): number => {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number));
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
};

/** The newest published x.y.z of this major, or undefined when the registry cannot be asked. */
function newestPublished(major: string): string | undefined {
  try {
    const out: unknown = JSON.parse(npm(['view', `${PACKAGE}@${major}`, 'version', '--json']));
    const versions = (Array.isArray(out) ? out : [out]).filter((v): v is string => typeof v === 'string' && /^\d+\.\d+\.\d+$/.test(v));
    return versions.sort(byVersion).at(-1);
  } catch {
    return undefined;
  }
}

function unpackedVersions(major: string): string[] {
  if (!existsSync(CACHE)) return [];
  return readdirSync(CACHE)
    .filter((v) => v.startsWith(`${major}.`) && existsSync(join(CACHE, v, 'bin', 'node')))
    .sort(byVersion);
}

/** The newest Node `major`.x for this machine. */
export function nodeBinary(major: string): NodeBinary {
  if (!/^\d+$/.test(major)) throw new Error(`a major version is needed (26, not ${JSON.stringify(major)})`);
  mkdirSync(CACHE, { recursive: true });
  const version = newestPublished(major) ?? unpackedVersions(major).at(-1);
  if (!version)
    throw new Error(`no ${PACKAGE}@${major} on the npm registry (or the registry is not reachable) and none unpacked in ${CACHE}`);
  const dir = join(CACHE, version);
  if (existsSync(join(dir, 'bin', 'node'))) return { version, dir };
  // Unpacked beside, then renamed: a run that is killed half-way leaves no half binary in place.
  const work = mkdtempSync(join(CACHE, `.${version}-`));
  try {
    const tarball = packFromRegistry(`${PACKAGE}@${version}`, work);
    mkdirSync(join(work, 'out'));
    // Only bin/node: the package also holds headers and docs, 200 MB unpacked.
    const tar = spawnSync('tar', ['-xzf', tarball, '-C', join(work, 'out'), '--strip-components=1', 'package/bin/node'], {
      encoding: 'utf8',
      timeout: NPM_TIMEOUT_MS,
    });
    if (tar.status !== 0) throw new Error(`unpacking ${tarball} failed: ${tar.stderr.trim()}`);
    const check = spawnSync(join(work, 'out', 'bin', 'node'), ['--version'], { encoding: 'utf8', timeout: 30_000 });
    if (check.stdout?.trim() !== `v${version}`)
      throw new Error(`${PACKAGE}@${version}'s bin/node says ${JSON.stringify(check.stdout ?? check.error?.message)}, not v${version}`);
    try {
      renameSync(join(work, 'out'), dir);
    } catch (err) {
      // Another run unpacked the same version meanwhile: use that one.
      if (!existsSync(join(dir, 'bin', 'node'))) throw err;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return { version, dir };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const major = process.argv[2] ?? dockerfileNodeMajor(readFileSync(fileURLToPath(new URL('../Dockerfile', import.meta.url)), 'utf8'));
    console.log(nodeBinary(major).dir);
  } catch (err) {
    console.error(`node-binary: ${(err as Error).message}`);
    process.exit(1);
  }
}
