// The validators behind `npm run check:deploy` (scripts/deploy/): each must reject what it is
// there to catch, or the check passes whatever the manifests and the dashboard say.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { validateComposeFile } from '../../scripts/deploy/compose-schema.js';
import { validateKubernetesObject } from '../../scripts/deploy/kubernetes.js';
import { dashboardQueries, metricNames } from '../../scripts/deploy/promql.js';

const COMPOSE = fileURLToPath(new URL('../../deploy/compose/docker-compose.yaml', import.meta.url));
const SIDECAR = fileURLToPath(new URL('../../deploy/kubernetes/sidecar/agent.yaml', import.meta.url));
const DASHBOARD = fileURLToPath(new URL('../../deploy/grafana/compaction-gateway.json', import.meta.url));

function sidecarDeployment(): any {
  const [doc] = parseAllDocuments(readFileSync(SIDECAR, 'utf8'));
  return doc.toJS();
}

describe('Kubernetes validation', () => {
  it('accepts the sidecar Deployment as it is', () => {
    expect(validateKubernetesObject(sidecarDeployment())).toEqual([]);
  });

  it('rejects a misspelt field, which the schemas alone allow', () => {
    const d = sidecarDeployment();
    const gateway = d.spec.template.spec.initContainers[0];
    gateway.livenesProbe = gateway.livenessProbe;
    delete gateway.livenessProbe;
    expect(validateKubernetesObject(d)).toEqual(['/spec/template/spec/initContainers/0/livenesProbe: unknown field']);
  });

  it('rejects wrong types, bad quantities and bad enums', () => {
    const d = sidecarDeployment();
    d.spec.template.spec.terminationGracePeriodSeconds = '60';
    d.spec.template.spec.initContainers[0].resources.limits.memory = '512 megabytes';
    d.spec.template.spec.initContainers[0].ports[0].protocol = 'HTTP';
    const problems = validateKubernetesObject(d);
    expect(problems).toContain('/spec/template/spec/terminationGracePeriodSeconds must be integer');
    expect(problems.some((p) => p.startsWith('/spec/template/spec/initContainers/0/resources/limits/memory must match format "quantity"'))).toBe(true);
    expect(problems.some((p) => p.startsWith('/spec/template/spec/initContainers/0/ports/0/protocol must be equal to one of the allowed values'))).toBe(true);
  });

  it('rejects a missing required field, an unknown kind and an unknown apiVersion', () => {
    const d = sidecarDeployment();
    delete d.spec.selector;
    expect(validateKubernetesObject(d)).toContain('/spec must have required property selector');
    expect(validateKubernetesObject({ apiVersion: 'apps/v1', kind: 'Deploymnt' })).toEqual(['kind Deploymnt does not exist in apps/v1']);
    expect(validateKubernetesObject({ apiVersion: 'apps/v1beta1', kind: 'Deployment' })[0]).toMatch(/^apiVersion apps\/v1beta1: not one/);
  });
});

describe('Compose Specification validation', () => {
  const compose = () => parseAllDocuments(readFileSync(COMPOSE, 'utf8'))[0].toJS();

  it('accepts deploy/compose/docker-compose.yaml as it is', () => {
    expect(validateComposeFile(compose())).toEqual([]);
  });

  it('rejects a misspelt key and a bad depends_on condition', () => {
    const c = compose();
    c.services.gateway.stop_grace_periode = c.services.gateway.stop_grace_period;
    c.services.agent.depends_on.gateway.condition = 'service_healty';
    const problems = validateComposeFile(c);
    expect(problems).toContain('/services/gateway: must NOT have additional properties (stop_grace_periode)');
    expect(problems).toContain('/services/agent/depends_on/gateway/condition: must be equal to one of the allowed values (service_started, service_healthy, service_completed_successfully)');
  });
});

describe('dashboard queries', () => {
  it('finds every query, with the variables replaced', () => {
    const { queries, problems } = dashboardQueries(JSON.parse(readFileSync(DASHBOARD, 'utf8')));
    expect(problems).toEqual([]);
    expect(queries.length).toBeGreaterThan(20);
    for (const q of queries) expect(q.expr, q.where).not.toMatch(/\$/);
  });

  it('names a variable the dashboard does not define, and a panel off the data-source variable', () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
    const panel = dashboard.panels.find((p: any) => p.targets?.length);
    panel.targets[0].expr = 'sum(rate(gateway_replays_total{instance=~"$instance"}[$__rate_interval]))';
    panel.datasource = { type: 'prometheus', uid: 'prometheus' };
    const { problems } = dashboardQueries(dashboard);
    expect(problems).toEqual([`panel ${panel.id} (${panel.title}): its datasource is not the $datasource variable`, `panel ${panel.id} (${panel.title}) A: unknown variable $instance`]);
  });

  it('reads metric names from an expression, not functions, labels or strings', () => {
    expect(metricNames('histogram_quantile(0.95, sum by (le) (rate(gateway_upstream_ttfb_seconds_bucket{job=~"gateway_x"}[5m]))) / up')).toEqual([
      'gateway_upstream_ttfb_seconds_bucket',
      'up',
    ]);
  });
});
