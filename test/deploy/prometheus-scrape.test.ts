// A real Prometheus (Debian's binary, on a loopback port) scrapes itself and a real gateway that
// has just rescued a request, and the rescue is read back through Prometheus's HTTP API. The
// gateway's target goes through deploy/prometheus/scrape-kubernetes-pods.yaml's relabel rules,
// labelled as Kubernetes discovery labels a pod of deploy/kubernetes/shared/gateway.yaml. The same
// Prometheus loads deploy/prometheus/alerts.yaml and evaluates every rule against the gateway's
// real series, runs every query of the Grafana dashboard, shows 1 on its "Gateways up" panel with
// All selected, and fires CompactionGatewayDown when the gateway stops and when its target goes.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { dashboardQueries, resolveAll } from '../../scripts/deploy/promql.js';
import { podTargetLabels } from './relabel.js';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/ports.js';
import { NGINX_413 } from '../helpers/provider.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';

const DEPLOY = fileURLToPath(new URL('../../deploy/', import.meta.url));
const HAVE_PROMETHEUS = spawnSync('prometheus', ['--version'], { stdio: 'ignore' }).status === 0;
const IN_CI = Boolean(process.env.CI);
/** Every wait in this file polls at most this long; a test or hook has room for two waits. */
const WAIT_MS = 30_000;
const TEST_MS = 2 * WAIT_MS + 10_000;

if (!HAVE_PROMETHEUS && !IN_CI) {
  console.warn(
    'test/deploy/prometheus-scrape.test.ts skipped: no prometheus binary on PATH (apt-get install prometheus; .ci/run installs it)',
  );
}

describe.skipIf(!HAVE_PROMETHEUS && !IN_CI)('Prometheus scraping a gateway through a rescue', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  let prometheus: ChildProcess | undefined;
  let prometheusLog = '';
  let api = '';
  let dir = '';
  let bothUpAt = 0;
  let gatewayStopped = false;

  /**
   * Prometheus scraping itself, and the gateway through the annotation-based job of
   * scrape-kubernetes-pods.yaml: its one target carries the discovery labels a pod of
   * shared/gateway.yaml would have, at the test gateway's address (its prometheus.io/port
   * annotation says the test gateway's port, not 8080).
   */
  function prometheusConfig({ port, withGateway }: { port: number; withGateway: boolean }): string {
    const [pods] = parseYaml(readFileSync(join(DEPLOY, 'prometheus', 'scrape-kubernetes-pods.yaml'), 'utf8')).scrape_configs;
    const deployment = parseAllDocuments(readFileSync(join(DEPLOY, 'kubernetes', 'shared', 'gateway.yaml'), 'utf8'))
      .map((d) => d.toJS())
      .find((o) => o.kind === 'Deployment');
    const template = structuredClone(deployment.spec.template);
    const { host, port: gatewayPort } = new URL(gateway.origin);
    template.metadata.annotations['prometheus.io/port'] = gatewayPort;
    const container = template.spec.containers.find((c: any) => c.name === 'compaction-gateway');
    const discovered = podTargetLabels(template, {
      job: pods.job_name,
      namespace: 'default',
      podName: 'compaction-gateway-0',
      podIp: '127.0.0.1',
      container,
      port: { ...container.ports[0], containerPort: Number(gatewayPort) },
      init: false,
    });
    const { job: _job, __address__: _address, __scheme__: _scheme, __metrics_path__: _path, ...labels } = discovered;
    // Without the gateway the job stays, with no target, as when discovery finds no pod: Prometheus
    // marks the gone target's series stale (a job removed from the config would leave them be).
    const gatewayJob = {
      job_name: pods.job_name,
      relabel_configs: pods.relabel_configs,
      static_configs: withGateway ? [{ targets: [host], labels }] : [],
    };
    return JSON.stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: ['alerts.yaml'],
      scrape_configs: [{ job_name: 'prometheus', static_configs: [{ targets: [`127.0.0.1:${port}`] }] }, gatewayJob],
    });
  }

  beforeAll(async () => {
    expect(HAVE_PROMETHEUS, "the prometheus binary must be on PATH in CI (.ci/run installs Debian's prometheus)").toBe(true);
    // Each rescued request: an nginx in front of the provider refuses it as too large, then the
    // compacted replay is answered (odd chat calls are refused, even ones answered).
    let chats = 0;
    upstream = await startFakeUpstream((req, res) => {
      if (!req.url.endsWith('/chat/completions')) return json(res, 404, { error: { message: 'not here' } });
      chats++;
      if (chats % 2 === 1) {
        res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
        return void res.end(NGINX_413);
      }
      return json(res, 200, completion('answered after compaction'));
    });
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, compaction: { strategy: 'fallback', mask: false } });

    dir = mkdtempSync(join(tmpdir(), 'prometheus-scrape-'));
    const port = await freePort();
    api = `http://127.0.0.1:${port}`;
    copyFileSync(join(DEPLOY, 'prometheus', 'alerts.yaml'), join(dir, 'alerts.yaml'));
    writeFileSync(join(dir, 'prometheus.yml'), prometheusConfig({ port, withGateway: true }));
    prometheus = spawn(
      'prometheus',
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stdout!.on('data', (c) => (prometheusLog += c));
    prometheus.stderr!.on('data', (c) => (prometheusLog += c));
    await waitFor('Prometheus ready', async () => {
      if (prometheus!.exitCode !== null || prometheus!.signalCode !== null) throw new Error(`prometheus exited: ${prometheusLog}`);
      const res = await fetch(`${api}/-/ready`).catch(() => undefined);
      return res?.status === 200 || undefined;
    });
    // Both targets scraped once: from here on every rule evaluation sees them.
    await waitFor('both targets up', async () => ((await query('up == 1')).length === 2 ? true : undefined));
    bothUpAt = Date.now();
  }, TEST_MS);

  afterAll(async () => {
    await stopProcess(prometheus);
    if (!gatewayStopped) await gateway?.close();
    await upstream?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, TEST_MS);

  it(
    'reads the rescue back as gateway_replays_total{result="success"} through /api/v1/query',
    async () => {
      const res = await postChat(gateway, agentRequest(40), { authorization: 'Bearer sk-client' });
      expect(res.status).toBe(200);
      expect(res.json.choices[0].message.content).toBe('answered after compaction');
      expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({
        outcome: 'replayed',
        reason: 'body_too_large',
        strategy: 'fallback',
      });

      const replays = await waitFor('the replay in Prometheus', async () => {
        const result = await query('sum by (result) (gateway_replays_total{job="compaction-gateway"})');
        const success = result.find((r: any) => r.metric.result === 'success');
        return success && Number(success.value[1]) >= 1 ? result : undefined;
      });
      // Every result starts at 0; the rescues' replays count as success (the second may have been sent compacted ahead).
      expect(replays.find((r: any) => r.metric.result === 'success')).toEqual({
        metric: { result: 'success' },
        value: [expect.any(Number), expect.stringMatching(/^[12]$/)],
      });
      expect(replays.filter((r: any) => r.metric.result !== 'success').every((r: any) => r.value[1] === '0')).toBe(true);

      const [up] = await query('up{job="compaction-gateway"}');
      expect(up.value[1]).toBe('1');
      const [overlong] = await query('sum(gateway_overlong_rejections_total{job="compaction-gateway",reason="body_too_large"})');
      expect(overlong.value[1]).toBe('1');
    },
    TEST_MS,
  );

  it(
    "evaluates every alert rule against the gateway's series without an error",
    async () => {
      const expected = (readFileSync(join(DEPLOY, 'prometheus', 'alerts.yaml'), 'utf8').match(/^\s+- alert: /gm) ?? []).length;
      expect(expected).toBeGreaterThanOrEqual(5);
      const rules = await waitFor('every rule evaluated', async () => {
        const body = await getJson(`${api}/api/v1/rules`);
        const all = body.data.groups.flatMap((g: any) => g.rules);
        // Evaluated since both targets were up: before the first scrape, absent() in CompactionGatewayDown is pending.
        return all.length === expected && all.every((r: any) => Date.parse(r.lastEvaluation) > bothUpAt) ? all : undefined;
      });
      for (const rule of rules) {
        expect({ rule: rule.name, health: rule.health, lastError: rule.lastError ?? '' }).toEqual({
          rule: rule.name,
          health: 'ok',
          lastError: '',
        });
      }
      // Nothing is wrong in this run: the gateway is up, one replay succeeded.
      expect(rules.filter((r: any) => r.state !== 'inactive').map((r: any) => r.name)).toEqual([]);
    },
    TEST_MS,
  );

  it(
    'runs every query of the Grafana dashboard, and the rescue shows on its panels',
    async () => {
      const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'compaction-gateway.json'), 'utf8'));
      const { queries, problems } = dashboardQueries(dashboard);
      expect(problems).toEqual([]);
      for (const q of queries) {
        const body = await getJson(`${api}/api/v1/query?query=${encodeURIComponent(q.expr)}`);
        expect({ where: q.where, status: body.status, error: body.error }).toEqual({ where: q.where, status: 'success', error: undefined });
      }

      // A second rescue, now that Prometheus has scraped the replay counter at 1: the "Rescued
      // requests" panel (an increase() over the range) counts it. (A labelled counter that first
      // appears at 1 has no earlier sample, so increase() cannot count the first event of a series.)
      const res = await postChat(gateway, agentRequest(40), { authorization: 'Bearer sk-client' });
      expect(res.status).toBe(200);
      const rescued = queries.find((q) => /Rescued requests/.test(q.where))!;
      const value = await waitFor('the second rescue on the Rescued requests panel', async () => {
        const [r] = (await getJson(`${api}/api/v1/query?query=${encodeURIComponent(rescued.expr)}`)).data.result;
        return r && Number(r.value[1]) >= 1 ? Number(r.value[1]) : undefined;
      });
      // increase() extrapolates to the range's edges, so one rescue shows as 1 or a little more.
      expect(value).toBeGreaterThanOrEqual(1);
      expect(value).toBeLessThan(3);
      const ratio = queries.find((q) => /Rescue failure ratio/.test(q.where))!;
      const failureRatio = async () =>
        Number((await getJson(`${api}/api/v1/query?query=${encodeURIComponent(ratio.expr)}`)).data.result[0]?.value[1]);
      expect(await failureRatio()).toBe(0);

      // A refusal the gateway cannot help (one message, nothing to compact) never replays: the
      // panel counts it all the same. (The nginx in front refuses this odd call too.)
      const lone = await postChat(
        gateway,
        { model: 'm', messages: [{ role: 'user', content: 'x'.repeat(300_000) }] },
        { authorization: 'Bearer sk-client' },
      );
      // The client gets it in its API's own overflow words (docs/rescue.md, when nothing can be rescued).
      expect(lone.status).toBe(400);
      expect(parseCompactionHeader(lone.headers.get('x-gateway-compaction'))).toMatchObject({
        outcome: 'not_shrunk',
        'overflow-error': 'translated',
      });
      const failed = await waitFor('the not_shrunk on the Rescue failure ratio panel', async () => {
        const value = await failureRatio();
        return value > 0 ? value : undefined;
      });
      // One failure beside one or two saved rescues.
      expect(failed).toBeGreaterThanOrEqual(0.3);
      expect(failed).toBeLessThanOrEqual(0.5);
    },
    TEST_MS,
  );

  it(
    'shows 1 on the "Gateways up" panel with All selected, and only the gateway on the process panels, beside a Prometheus scraping itself',
    async () => {
      // Two targets: the gateway and Prometheus itself, both up.
      expect((await query('up')).map((r: any) => r.metric.job).sort()).toEqual(['compaction-gateway', 'prometheus']);
      const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'compaction-gateway.json'), 'utf8'));
      // The variables as Grafana resolves them on load, "All" selected.
      const values = await resolveAll(dashboard, async (selector, label) => {
        const body = await getJson(`${api}/api/v1/label/${label}/values?match[]=${encodeURIComponent(selector)}`);
        expect(body.status).toBe('success');
        return body.data;
      });
      const { queries } = dashboardQueries(dashboard, { values });
      const panel = (title: string) => queries.filter((q) => q.where.includes(`(${title})`));

      const [up] = panel('Gateways up');
      const result = await query(up.expr);
      expect({ expr: up.expr, values: result.map((r: any) => r.value[1]) }).toEqual({ expr: up.expr, values: ['1'] });

      // Memory and CPU: the gateway's process, not Prometheus's (which exports the same process_* metrics).
      const gatewayInstance = new URL(gateway.origin).host;
      for (const q of [...panel('Memory'), ...panel('CPU')]) {
        const series = await query(q.expr);
        expect({ where: q.where, instances: [...new Set(series.map((r: any) => r.metric.instance))] }).toEqual({
          where: q.where,
          instances: [gatewayInstance],
        });
      }
    },
    TEST_MS,
  );

  it(
    'fires CompactionGatewayDown when the gateway stops, and when its target is gone',
    async () => {
      // The shipped rules with `for: 2s` instead of 5m, loaded by a reload (SIGHUP).
      const rules = parseYaml(readFileSync(join(DEPLOY, 'prometheus', 'alerts.yaml'), 'utf8'));
      const down = rules.groups.flatMap((g: any) => g.rules).find((r: any) => r.alert === 'CompactionGatewayDown');
      down.for = '2s';
      writeFileSync(join(dir, 'alerts.yaml'), JSON.stringify(rules));
      prometheus!.kill('SIGHUP');
      await waitFor('the reloaded Down rule', async () => {
        const body = await getJson(`${api}/api/v1/rules`);
        const rule = body.data.groups.flatMap((g: any) => g.rules).find((r: any) => r.name === 'CompactionGatewayDown');
        return rule?.duration === 2 && rule.state === 'inactive' ? rule : undefined;
      });

      await gateway.close();
      gatewayStopped = true;
      const instance = new URL(gateway.origin).host;
      const [stopped] = await waitFor('CompactionGatewayDown firing for the stopped gateway', async () => {
        const firing = await firingDown();
        return firing.length > 0 ? firing : undefined;
      });
      expect(stopped.labels).toEqual({
        alertname: 'CompactionGatewayDown',
        severity: 'critical',
        job: 'compaction-gateway',
        instance,
        namespace: 'default',
        pod: 'compaction-gateway-0',
        app_kubernetes_io_name: 'compaction-gateway',
      });
      expect(stopped.annotations.summary).toBe(`compaction-gateway ${instance} is not answering scrapes`);

      // Its target gone, as when its pods are: absent() takes over.
      writeFileSync(join(dir, 'prometheus.yml'), prometheusConfig({ port: Number(new URL(api).port), withGateway: false }));
      prometheus!.kill('SIGHUP');
      const [gone] = await waitFor('CompactionGatewayDown firing with no gateway target', async () => {
        const firing = (await firingDown()).filter((a: any) => a.labels.instance === undefined);
        return firing.length > 0 ? firing : undefined;
      });
      expect(gone.labels).toEqual({ alertname: 'CompactionGatewayDown', severity: 'critical', job: 'compaction-gateway' });
      expect(gone.annotations.summary).toBe('Prometheus has no compaction-gateway target');
      // Prometheus itself is still scraped and up: the alert is about the gateway only.
      expect((await query('up')).map((r: any) => [r.metric.job, r.value[1]])).toEqual([['prometheus', '1']]);
    },
    TEST_MS,
  );

  async function firingDown(): Promise<any[]> {
    const body = await getJson(`${api}/api/v1/alerts`);
    return body.data.alerts.filter((a: any) => a.labels.alertname === 'CompactionGatewayDown' && a.state === 'firing');
  }

  async function query(promql: string): Promise<any[]> {
    const body = await getJson(`${api}/api/v1/query?query=${encodeURIComponent(promql)}`);
    expect(body.status).toBe('success');
    return body.data.result;
  }
});

async function getJson(url: string): Promise<any> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return res.json();
}

/** Polls `probe` every 200 ms until it returns a value, for at most WAIT_MS. */
async function waitFor<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      // A process that has exited will not become ready: say so at once.
      if (/exited/.test(String((err as Error).message))) throw err;
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out after ${WAIT_MS} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}

/** SIGTERM, then SIGKILL after 10 s; resolves once the process has gone (whichever way). */
async function stopProcess(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(killer);
}
