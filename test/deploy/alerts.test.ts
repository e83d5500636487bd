// The alerts and the dashboard against the scrape setups and the gateway: CompactionGatewayDown
// selects the job every scrape setup gives the gateway, and every metric they use is one a real
// gateway's /metrics exposes. A planted fault of each kind is named.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { kubernetesDocuments } from '../../scripts/deploy/kubernetes.js';
import { validateConfig } from '../../src/config/load.js';
import { buildServer } from '../../src/server.js';
import { DEPLOY, downSelectorProblems, metricsProblems } from './cross-checks.js';

const alerts = () => parseYaml(readFileSync(join(DEPLOY, 'prometheus', 'alerts.yaml'), 'utf8'));
const composePrometheus = () => parseYaml(readFileSync(join(DEPLOY, 'compose', 'prometheus.yml'), 'utf8'));
const pods = () => parseYaml(readFileSync(join(DEPLOY, 'prometheus', 'scrape-kubernetes-pods.yaml'), 'utf8'));
const dashboard = () => JSON.parse(readFileSync(join(DEPLOY, 'grafana', 'compaction-gateway.json'), 'utf8'));
const docs = () => kubernetesDocuments(join(DEPLOY, 'kubernetes'));
const downRule = (rules: any) => rules.groups.flatMap((g: any) => g.rules).find((r: any) => r.alert === 'CompactionGatewayDown');

async function gatewayMetrics(): Promise<string> {
  const app = buildServer(validateConfig({ log: { level: 'silent' } }));
  try {
    return (await app.inject({ method: 'GET', url: '/metrics' })).body;
  } finally {
    await app.close();
  }
}

describe('CompactionGatewayDown', () => {
  it('selects the job that compose, the annotation scrape job and the monitors give the gateway', () => {
    expect(downSelectorProblems(alerts(), composePrometheus(), pods(), docs())).toEqual([]);
  });

  it('names a selector without absent(), and a scrape job whose relabeling renames the job', () => {
    const rules = alerts();
    const down = downRule(rules);
    down.expr = down.expr.replace(/\s*or\s+absent\s*\(\s*up\s*\{[^}]*\}\s*\)/, '');
    const scrape = pods();
    scrape.scrape_configs[0].relabel_configs.push({ target_label: 'job', replacement: 'kubernetes-pods' });
    const problems = downSelectorProblems(rules, composePrometheus(), scrape, docs());
    expect(problems[0]).toMatch(/^CompactionGatewayDown has no absent\(up\{\.\.\.\}\)/);
    expect(problems.slice(1).length).toBeGreaterThan(0);
    for (const p of problems.slice(1)) {
      expect(p).toMatch(
        /\(annotations\): the gateway's target gets job="kubernetes-pods", which \{job="compaction-gateway"\} does not match/,
      );
    }
  });
});

describe('the metrics the alerts and the dashboard use', () => {
  it("all exist on a gateway's /metrics", async () => {
    expect(metricsProblems(await gatewayMetrics(), alerts(), dashboard())).toEqual([]);
  });

  it('names a misspelt metric and a histogram read without _bucket', async () => {
    const rules = alerts();
    const rule = rules.groups.flatMap((g: any) => g.rules).find((r: any) => /\bgateway_\w+_total\b/.test(r.expr));
    const metric = /\bgateway_(\w+)_total\b/.exec(rule.expr)![0];
    rule.expr = rule.expr.replaceAll(metric, metric.replace(/_total$/, '_totl'));
    const d = dashboard();
    const panel = d.panels.find((p: any) => p.targets?.some((t: any) => /_bucket\b/.test(t.expr)));
    const target = panel.targets.find((t: any) => /_bucket\b/.test(t.expr));
    target.expr = target.expr.replace(/(gateway_\w+)_bucket\b/, '$1');
    const problems = metricsProblems(await gatewayMetrics(), rules, d);
    expect(problems).toContain(
      `alert ${rule.alert ?? rule.record}: ${metric.replace(/_total$/, '_totl')} is not a metric the gateway exposes`,
    );
    expect(problems).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^dashboard panel ${panel.id} \\(.*\\) ${target.refId}: gateway_\\w+ is a histogram: use gateway_\\w+_bucket, _sum or _count$`,
        ),
      ),
    );
  });
});
