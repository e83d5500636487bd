// The reference tables in docs/ against the code they describe, so that neither can drift:
// the configuration table against the schema and the environment table, the error table against
// the catalogue, the metrics table against the registry; and every link between the documents
// resolves, to a file and to a heading. The README's two commands are the ones CI runs.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ENV_KEYS } from '../../src/config/load.js';
import { configSchema, MiB } from '../../src/config/schema.js';
import { ERRORS } from '../../src/http/errors.js';
import { createMetrics } from '../../src/telemetry/metrics.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/** Markdown without its fenced code blocks (a link or a table inside one is an example). */
function prose(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```[^\n]*$/gm, '');
}

/** The cells of a table row, split on `|` outside code spans. */
function cells(line: string): string[] {
  const out: string[] = [];
  let cell = '';
  let code = false;
  for (const ch of line.trim().replace(/^\|/, '').replace(/\|$/, '')) {
    if (ch === '`') code = !code;
    if (ch === '|' && !code) {
      out.push(cell.trim());
      cell = '';
    } else cell += ch;
  }
  out.push(cell.trim());
  return out;
}

/** The body rows of every table whose header row starts with `header`. */
function tableRows(markdown: string, header: string[]): string[][] {
  const lines = prose(markdown).split('\n');
  const rows: string[][] = [];
  for (let i = 0; i < lines.length; i++) {
    const head = lines[i].trim().startsWith('|') ? cells(lines[i]) : [];
    if (header.some((h, j) => head[j] !== h)) continue;
    for (i += 2; i < lines.length && lines[i].trim().startsWith('|'); i++) rows.push(cells(lines[i]));
  }
  return rows;
}

/** The code spans of a cell: `a`, `b` -> [a, b]. */
const codes = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);

function bare(node: z.ZodType): z.ZodType {
  let inner = node;
  while (inner instanceof z.ZodDefault || inner instanceof z.ZodOptional) inner = inner.unwrap() as z.ZodType;
  return inner;
}

/**
 * Every key the schema takes, as the table writes it: `server.port`, `upstreams.NAME.url` (a
 * mapping of names), `routes[].api` (a list of mappings). `leaf` is false for a key that only
 * holds other keys; a key that takes a value or a mapping (`memory.redis`) is both.
 */
function schemaKeys(node: z.ZodType = configSchema, path = ''): Array<{ key: string; leaf: boolean }> {
  const at = (key: string) => (path ? `${path}.${key}` : key);
  const inner = bare(node);
  if (inner instanceof z.ZodObject) {
    return Object.entries(inner.shape as Record<string, z.ZodType>).flatMap(([key, child]) => {
      const kids = schemaKeys(child, at(key));
      return kids.some((k) => k.key === at(key)) ? kids : [{ key: at(key), leaf: false }, ...kids];
    });
  }
  if (!path) return [];
  if (inner instanceof z.ZodRecord)
    return [
      { key: path, leaf: false },
      ...schemaKeys(inner.valueType as z.ZodType, `${path}.NAME`).filter((k) => k.key !== `${path}.NAME`),
    ];
  if (inner instanceof z.ZodArray && bare(inner.element as z.ZodType) instanceof z.ZodObject) {
    return [{ key: path, leaf: true }, ...schemaKeys(inner.element as z.ZodType, `${path}[]`).filter((k) => k.key !== `${path}[]`)];
  }
  if (inner instanceof z.ZodUnion) {
    const objects = (inner.options as z.ZodType[]).filter((o) => bare(o) instanceof z.ZodObject);
    return [{ key: path, leaf: true }, ...objects.flatMap((o) => schemaKeys(o, path).filter((k) => k.key !== path))];
  }
  return [{ key: path, leaf: true }];
}

/** The default the schema gives `key` when nothing is set. */
function defaultOf(key: string): unknown {
  let node: unknown = configSchema.parse({});
  for (const part of key.split('.')) node = (node as Record<string, unknown> | undefined)?.[part];
  return node;
}

const UNITS: Record<string, number> = { KiB: 1024, MiB, GiB: 1024 * MiB };

/**
 * What a default cell states, when it states a value: `unset...` (no value), a code span alone
 * (`true`, `127.0.0.1`, `[]`), a number with an optional unit (64 MiB). Prose states nothing checkable.
 */
function statedDefault(cell: string): { value: unknown } | undefined {
  if (/^unset\b/.test(cell)) return { value: undefined };
  const code = /^`([^`]*)`$/.exec(cell);
  if (code) return { value: code[1] };
  const number = /^(\d[\d,]*(?:\.\d+)?)(?: (KiB|MiB|GiB))?$/.exec(cell);
  if (number) return { value: Number(number[1].replace(/,/g, '')) * (number[2] ? UNITS[number[2]] : 1) };
  return undefined;
}

const shown = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));

describe('docs/configuration.md', () => {
  const rows = tableRows(read('docs/configuration.md'), ['key', 'env', 'default', 'meaning']);
  const documented = rows.map(([key]) => codes(key)[0]);
  const keys = schemaKeys();

  it('has a row for every key of the schema, and none for a key it does not have', () => {
    expect(rows.length).toBeGreaterThan(50);
    expect(
      keys
        .filter((k) => k.leaf)
        .map((k) => k.key)
        .filter((k) => !documented.includes(k)),
      'keys the table leaves out',
    ).toEqual([]);
    expect(
      documented.filter((k) => !keys.some((s) => s.key === k)),
      'rows for no key',
    ).toEqual([]);
    expect(
      documented.filter((k, i) => documented.indexOf(k) !== i),
      'rows twice',
    ).toEqual([]);
  });

  it('names every environment variable at the key it sets, and no other', () => {
    const stated = rows.flatMap(([key, env]) => codes(env).map((name) => [name, codes(key)[0]] as const));
    expect(stated.map(([name, key]) => `${name} -> ${key}`).sort()).toEqual(ENV_KEYS.map(([name, key]) => `${name} -> ${key}`).sort());
  });

  it('states each default the schema gives', () => {
    const checked = rows.flatMap(([keyCell, , cell]) => {
      const key = codes(keyCell)[0];
      const stated = statedDefault(cell);
      return stated === undefined || /NAME|\[\]/.test(key) ? [] : [{ key, stated: shown(stated.value), actual: shown(defaultOf(key)) }];
    });
    expect(checked.length).toBeGreaterThan(40);
    expect(checked.filter((c) => c.stated !== c.actual)).toEqual([]);
  });
});

describe("the README's table of the most used settings", () => {
  it('is rows of docs/configuration.md, word for word', () => {
    const reference = new Map(tableRows(read('docs/configuration.md'), ['key', 'env', 'default', 'meaning']).map((row) => [row[0], row]));
    const rows = tableRows(read('README.md'), ['key', 'env', 'default', 'meaning']);
    expect(rows.length).toBeGreaterThan(8);
    // The README's links are relative to the root, the reference's to docs/.
    const same = (row: string[]) => row.map((cell) => cell.replace(/\]\(docs\//g, ']('));
    for (const row of rows) expect(same(row), row[0]).toEqual(reference.get(row[0]));
  });
});

describe('docs/errors.md', () => {
  it('lists every code of the catalogue with its status, and no other', () => {
    const rows = tableRows(read('docs/errors.md'), ['status', '`code`']);
    const documented = Object.fromEntries(rows.map(([status, code]) => [codes(code)[0], Number(status)]));
    expect(documented).toEqual(Object.fromEntries(Object.entries(ERRORS).map(([code, e]) => [code, e.status])));
  });
});

describe('docs/metrics.md', () => {
  it("lists every metric of the gateway's registry", async () => {
    const rows = tableRows(read('docs/metrics.md'), ['metric', 'type']);
    const documented = new Set(rows.flatMap(([metric]) => codes(metric)));
    const registered = (await createMetrics().registry.getMetricsAsJSON()).map((m) => m.name).filter((name) => name.startsWith('gateway_'));
    expect(registered.length).toBeGreaterThan(10);
    expect(registered.filter((name) => !documented.has(name))).toEqual([]);
  });
});

/** A heading's anchor as GitHub makes it: lower case, punctuation gone, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*$/gm)) {
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

const DOCUMENTS = [
  'README.md',
  'CONTRIBUTING.md',
  'BENCHMARKS.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

describe('links between the documents', () => {
  it.each(DOCUMENTS)('%s: every relative link reaches a file, and every #anchor a heading', (doc) => {
    const text = read(doc);
    const broken: string[] = [];
    for (const m of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1];
      if (/^[a-z]+:/i.test(target)) continue;
      const [file, anchor] = target.split('#');
      const path = file ? resolve(dirname(join(ROOT, doc)), file) : join(ROOT, doc);
      if (!existsSync(path)) broken.push(`${target}: no file ${relative(ROOT, path)}`);
      else if (anchor !== undefined && path.endsWith('.md') && !anchors(readFileSync(path, 'utf8')).has(anchor))
        broken.push(`${target}: no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });
});

describe('what the documents name', () => {
  const scripts = Object.keys(JSON.parse(read('package.json')).scripts as Record<string, string>);
  it.each(DOCUMENTS)('%s: every `npm run` script exists', (doc) => {
    const named = [...read(doc).matchAll(/npm run ([a-z][a-z:-]*)/g)].map((m) => m[1]);
    expect(named.filter((name) => !scripts.includes(name))).toEqual([]);
  });

  // BENCHMARKS.md quotes bench/findings.md, a record of past rounds, with the files of their time.
  it.each(DOCUMENTS.filter((doc) => doc !== 'BENCHMARKS.md'))('%s: every file it names in a code span exists', (doc) => {
    const named = [...read(doc).matchAll(/`((?:src|test|bench|scripts|deploy|config)\/[^`\s*{}<>]+)`/g)].map((m) => m[1]);
    expect(named.filter((path) => !existsSync(join(ROOT, path)))).toEqual([]);
  });
});

describe("the README's two commands", () => {
  it('run the gateway and the tests as CI does', () => {
    const readme = read('README.md');
    const ci = read('.ci/run');
    expect(readme).toMatch(/^npm ci && npm start\b/m);
    expect(readme).toMatch(/^npm test\b/m);
    expect(ci).toMatch(/^npm ci\b/m);
    expect(ci).toMatch(/^npm test\b/m);
  });
});
