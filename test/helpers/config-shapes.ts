import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { z } from 'zod';
import { ENV_KEYS } from '../../src/config/load.js';
import { configSchema } from '../../src/config/schema.js';
import { schemaAt } from '../../src/config/shape.js';

/*
 * Config files and environments drawn from the schema's own shapes: every key it has, at every
 * level (named upstreams, routes, the Redis mapping), each value of its kind or of another
 * (a string for a number, a mapping for a URL), strings from the mistakes people make (a URL
 * without its scheme, an empty one, a `${VAR}` never set, a line break), unknown keys beside
 * known ones, and environment variables of the gateway and of the proxy with such values.
 */

const DIR = mkdtempSync(join(tmpdir(), 'gw-shapes-'));
const PEM = join(DIR, 'ca.pem');
const NOT_PEM = join(DIR, 'not.pem');
writeFileSync(PEM, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
writeFileSync(NOT_PEM, 'hello');

const TEXTS = [
  '',
  ' ',
  'https://api.openai.com/v1',
  'http://127.0.0.1:9/v1',
  'http://127.0.0.1:9',
  'api.anthropic.com/v1',
  'localhost:11434',
  'http://',
  'http:foo',
  'ftp://example.com/v1',
  'https://user:sk-secret@example.com/v1?api-key=sk-secret',
  'http://[::1]:8080/v1',
  'http://a b/v1',
  'redis://127.0.0.1:6379',
  'rediss://:pw@cache:6380/2',
  'cache:6379',
  'none',
  'default',
  'chat',
  '${GW_FUZZ_UNSET}',
  '${GW_FUZZ_UNSET:-http://127.0.0.1:9/v1}',
  '${ bad }',
  '$${literal}',
  'line\nbreak',
  '\u001b[31mred',
  'ünïcödé',
  '*',
  'qwen*=32768,llama3*=8192',
  '32768',
  '-1',
  '1e309',
  'true',
  'x'.repeat(300),
];

const text = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...TEXTS) }, { weight: 1, arbitrary: fc.string({ maxLength: 40 }) });
/** A caFile is only ever one of these: a fuzzer must not read /dev/zero. */
const caPath = fc.constantFrom(PEM, NOT_PEM, join(DIR, 'missing.pem'), DIR, '');
const wrongKind = fc.oneof(
  text,
  fc.integer({ min: -3, max: 70_000 }),
  fc.boolean(),
  fc.constant(null),
  fc.array(text, { maxLength: 2 }),
  fc.constant({ nested: 'x' }),
);
const NAMES = ['default', 'a', 'openai', 'anthropic', 'v1', 'metrics', 'Bad Name', 'x'.repeat(40), '', 'new\nline'];

function unwrap(node: z.ZodType): z.ZodType {
  let inner = node;
  while (inner instanceof z.ZodDefault || inner instanceof z.ZodOptional) inner = inner.unwrap() as z.ZodType;
  return inner;
}

/** A value for the schema node `node` at key `key`: mostly of its shape, sometimes of another. */
function valueOf(node: z.ZodType, key: string, depth: number): fc.Arbitrary<unknown> {
  const bare = unwrap(node);
  const right = rightValue(bare, key, depth);
  return fc.oneof({ weight: 12, arbitrary: right }, { weight: 1, arbitrary: wrongKind });
}

function rightValue(node: z.ZodType, key: string, depth: number): fc.Arbitrary<unknown> {
  if (node instanceof z.ZodObject) return mapping(node, depth);
  if (node instanceof z.ZodRecord)
    return fc.dictionary(fc.constantFrom(...NAMES), valueOf(node.valueType as z.ZodType, key, depth + 1), { maxKeys: 3 });
  if (node instanceof z.ZodArray) return fc.array(valueOf(node.element as z.ZodType, key, depth + 1), { maxLength: 3 });
  if (node instanceof z.ZodUnion) return fc.oneof(...(node.options as z.ZodType[]).map((o) => rightValue(unwrap(o), key, depth + 1)));
  if (node instanceof z.ZodNumber) return fc.oneof(fc.integer({ min: -2, max: 100_000 }), fc.constantFrom(0, 1.5, 65_536, 2 ** 31, 256));
  if (node instanceof z.ZodBoolean) return fc.boolean();
  if (node instanceof z.ZodEnum) return fc.constantFrom(...(node.options as string[]));
  if (node instanceof z.ZodLiteral) return fc.constant(node.value);
  if (/caFile$/.test(key)) return caPath;
  return text;
}

function mapping(node: z.ZodObject, depth: number): fc.Arbitrary<Record<string, unknown>> {
  if (depth > 4) return fc.constant({});
  const shape = node.shape as Record<string, z.ZodType>;
  // A few keys of each mapping, as configs are written: one mistake among them is often the only one.
  const known = fc
    .subarray(Object.keys(shape), { maxLength: Math.min(3, Object.keys(shape).length) })
    .chain((keys) => fc.record(Object.fromEntries(keys.map((k) => [k, valueOf(shape[k], k, depth + 1)]))));
  // Now and then a key the schema does not have (a misspelling, a key at the wrong level, a line break).
  const unknown = fc.dictionary(fc.constantFrom('api_key', 'timeout', 'prot', 'base_url', 'two\nlines'), text, { maxKeys: 1 });
  return fc
    .tuple(known, fc.oneof({ weight: 4, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: unknown }))
    .map(([a, b]) => ({ ...b, ...a }));
}

/** A config file's parsed content, from the schema's root. */
const configTree = mapping(unwrap(configSchema) as z.ZodObject, 0);

const PROXY_VARIABLES = ['HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'NO_PROXY'];

/** A variable's text: mostly what its key takes, written as the environment writes it; sometimes a mistake. */
function variableText(path: string): fc.Arbitrary<string> {
  const key = path.split('.');
  const right = rightValue(unwrap(schemaAt(key) ?? z.string()), key.at(-1)!, 5).map((v) =>
    Array.isArray(v)
      ? v.map((x) => (typeof x === 'object' && x !== null ? Object.values(x).join('=') : String(x))).join(',')
      : typeof v === 'object' && v !== null
        ? ''
        : String(v),
  );
  return fc.oneof({ weight: 4, arbitrary: right }, { weight: 1, arbitrary: text });
}

const variables: Array<[string, fc.Arbitrary<string>]> = [
  ...ENV_KEYS.filter(([name]) => !/CA_FILE$/.test(name)).map(([name, path]): [string, fc.Arbitrary<string>] => [name, variableText(path)]),
  ...PROXY_VARIABLES.map((name): [string, fc.Arbitrary<string>] => [name, text]),
];

/** The gateway's variables and the proxy's, a few at a time. */
const environment = fc
  .subarray(variables, { maxLength: 3 })
  .chain((chosen) => fc.record(Object.fromEntries(chosen.map(([name, value]) => [name, value]))) as fc.Arbitrary<Record<string, string>>);

export interface ConfigInput {
  /** The file's text: the tree as YAML or JSON, or now and then text that is neither. */
  file: string;
  env: Record<string, string>;
}

export const configInput: fc.Arbitrary<ConfigInput> = fc.record({
  file: fc.oneof(
    { weight: 6, arbitrary: configTree.map((tree) => stringify(tree)) },
    { weight: 2, arbitrary: configTree.map((tree) => JSON.stringify(tree)) },
    {
      weight: 1,
      arbitrary: fc.oneof(fc.string({ maxLength: 60 }), fc.constantFrom('- a\n- b\n', 'server: [\n', 'a: b: c', '"x', '42', 'null')),
    },
  ),
  env: environment,
});

let written = 0;
/** Writes the input's file, returning its path. */
export function writeConfig(input: ConfigInput): string {
  const path = join(DIR, `gw-${written++}.yaml`);
  writeFileSync(path, input.file);
  return path;
}
