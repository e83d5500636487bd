import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

// One image tag wherever a person is told to build, run or deploy the gateway's image: the
// README, the docs, the Dockerfile's own comment, Compose and Kubernetes. It is the package's
// version, so a release that bumps one is reminded of the others.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const VERSION = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version as string;

function files(dir: string, ext: RegExp): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((f) => f.isFile() && ext.test(f.name))
    .map((f) => join(f.parentPath, f.name));
}

/** Every reference to the gateway's image: `image:`, `docker build -t`, the last word of `docker run`, a backticked `compaction-gateway:TAG`. */
function imageReferences(text: string): string[] {
  const image = String.raw`(?:[\w.-]+(?::\d+)?/)*compaction-gateway(?::[\w.-]+)?`;
  const patterns = [
    new RegExp(String.raw`^\s*image:\s*["']?(${image})["']?\s*$`, 'gm'),
    new RegExp(String.raw`docker build\b[^\n]*\s-t\s+(${image})(?=\s)`, 'g'),
    new RegExp(String.raw`docker run\b[^\n]*\s(${image})\s*$`, 'gm'),
    // Backticked only with a tag (`compaction-gateway:8080` is a host and port, bare `compaction-gateway` the service or the bin).
    new RegExp(String.raw`\x60((?:[\w.-]+(?::\d+)?/)*compaction-gateway:(?!\d+\x60)[\w.-]+)\x60`, 'g'),
  ];
  return patterns.flatMap((p) => [...text.matchAll(p)].map((m) => m[1]));
}

it(`names the image compaction-gateway:${VERSION} (package.json's version) everywhere`, () => {
  const sources = [join(ROOT, 'README.md'), join(ROOT, 'Dockerfile'), ...files('docs', /\.md$/), ...files('deploy', /\.ya?ml$/)];
  const found = sources.flatMap((file) => imageReferences(readFileSync(file, 'utf8')).map((ref) => ({ file: relative(ROOT, file), ref })));
  const where = new Set(found.map((f) => f.file));
  for (const file of [
    'README.md',
    'Dockerfile',
    'docs/deploying.md',
    'deploy/compose/docker-compose.yaml',
    'deploy/kubernetes/shared/gateway.yaml',
    'deploy/kubernetes/sidecar/agent.yaml',
  ])
    expect(where).toContain(file);
  expect(found.filter((f) => f.ref !== `compaction-gateway:${VERSION}`)).toEqual([]);
});

it('finds a tag that differs, or none at all', () => {
  expect(imageReferences('    image: compaction-gateway:local\n')).toEqual(['compaction-gateway:local']);
  expect(imageReferences('docker build -t compaction-gateway .\ndocker run -p 8080:8080 -e A=b compaction-gateway\n')).toEqual([
    'compaction-gateway',
    'compaction-gateway',
  ]);
  expect(imageReferences('the `ghcr.io/x/compaction-gateway:1.2.3` image')).toEqual(['ghcr.io/x/compaction-gateway:1.2.3']);
  expect(imageReferences('| `compaction-gateway:v5:s:SESSION` | a key |')).toEqual([]);
  expect(imageReferences('the `compaction-gateway` service on `compaction-gateway:8080`')).toEqual([]);
});
