// The validators behind `npm run check:deploy` (scripts/deploy/): each must reject what it is
// there to catch, or the check passes whatever the manifests and the dashboard say.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { validateComposeFile } from '../../scripts/deploy/compose.js';
import { validateKubernetesObject } from '../../scripts/deploy/kubernetes.js';
import { allValueOf, dashboardQueries, gatewayScopeProblems, labelValuesVariables, metricNames } from '../../scripts/deploy/promql.js';
import { matches, parseMatchers, relabel } from './relabel.js';

const COMPOSE = fileURLToPath(new URL('../../deploy/compose/docker-compose.yaml', import.meta.url));
const SIDECAR = fileURLToPath(new URL('../../deploy/kubernetes/sidecar/agent.yaml', import.meta.url));
const DASHBOARD = fileURLToPath(new URL('../../deploy/grafana/compaction-gateway.json', import.meta.url));
const SERVICE_MONITOR = fileURLToPath(new URL('../../deploy/kubernetes/prometheus-operator/servicemonitor.yaml', import.meta.url));

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
    expect(
      problems.some((p) => p.startsWith('/spec/template/spec/initContainers/0/resources/limits/memory must match format "quantity"')),
    ).toBe(true);
    expect(
      problems.some((p) =>
        p.startsWith('/spec/template/spec/initContainers/0/ports/0/protocol must be equal to one of the allowed values'),
      ),
    ).toBe(true);
  });

  it('rejects a missing required field, an unknown kind and an unknown apiVersion', () => {
    const d = sidecarDeployment();
    delete d.spec.selector;
    expect(validateKubernetesObject(d)).toContain('/spec must have required property selector');
    expect(validateKubernetesObject({ apiVersion: 'apps/v1', kind: 'Deploymnt' })).toEqual(['kind Deploymnt does not exist in apps/v1']);
    expect(validateKubernetesObject({ apiVersion: 'apps/v1beta1', kind: 'Deployment' })[0]).toMatch(/^apiVersion apps\/v1beta1: not one/);
  });
});

describe('Prometheus Operator validation', () => {
  const monitor = () => parseAllDocuments(readFileSync(SERVICE_MONITOR, 'utf8'))[0].toJS();

  it('accepts the ServiceMonitor as it is, and rejects a misspelt field and a bad interval', () => {
    expect(validateKubernetesObject(monitor())).toEqual([]);
    const m = monitor();
    m.spec.endpoints[0].bearerTokenSecrett = { name: 'compaction-gateway', key: 'metrics-key' };
    m.spec.endpoints[0].interval = '30 seconds';
    const problems = validateKubernetesObject(m);
    expect(problems).toContain('/spec/endpoints/0/bearerTokenSecrett: unknown field');
    expect(problems.some((p) => p.startsWith('/spec/endpoints/0/interval must match pattern'))).toBe(true);
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
    expect(problems).toContain(
      '/services/agent/depends_on/gateway/condition: must be equal to one of the allowed values (service_started, service_healthy, service_completed_successfully)',
    );
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
    panel.targets[0].expr = 'sum(rate(gateway_replays_total{pod=~"$pod"}[$__rate_interval]))';
    panel.datasource = { type: 'prometheus', uid: 'prometheus' };
    const { problems } = dashboardQueries(dashboard);
    expect(problems).toEqual([
      `panel ${panel.id} (${panel.title}): its datasource is not the $datasource variable`,
      `panel ${panel.id} (${panel.title}) A: unknown variable $pod`,
    ]);
  });

  it('reads metric names from an expression, not functions, labels or strings', () => {
    expect(
      metricNames('histogram_quantile(0.95, sum by (le) (rate(gateway_upstream_ttfb_seconds_bucket{job=~"gateway_x"}[5m]))) / up'),
    ).toEqual(['gateway_upstream_ttfb_seconds_bucket', 'up']);
  });
});

describe('the dashboard selects the gateway only', () => {
  const dashboard = () => JSON.parse(readFileSync(DASHBOARD, 'utf8'));

  it("passes as it is: every variable lists a gateway metric's values, every selector filters by them", () => {
    expect(gatewayScopeProblems(dashboard())).toEqual([]);
    expect(labelValuesVariables(dashboard()).variables.map((v) => [v.name, v.selector, v.label])).toEqual([
      ['job', 'gateway_http_requests_total', 'job'],
      ['instance', 'gateway_http_requests_total{job=~"$job"}', 'instance'],
    ]);
  });

  it('names a catch-all All, a variable over every target, and a selector without the filters', () => {
    const d = dashboard();
    d.templating.list[1].allValue = '.+';
    d.templating.list[2].query.query = 'label_values(up, instance)';
    const up = d.panels.find((p: any) => p.title === 'Gateways up');
    up.targets[0].expr = 'sum(up{job=~"$job"})';
    expect(gatewayScopeProblems(d)).toEqual([
      'variable $job: "All" is allValue ".+", which matches every target, not the job values found',
      'variable $instance: lists instance values of up, not of a gateway_ metric, so it may offer other targets',
      `panel ${up.id} (Gateways up) A: up{job=~"$job"} lacks instance=~"$instance"`,
    ]);
  });

  it('resolves All as Grafana does: the allValue as written, else every value found, regex-escaped', () => {
    const v = { name: 'instance', selector: 'gateway_http_requests_total', label: 'instance', multi: true, includeAll: true };
    expect(allValueOf(v, ['10.0.0.2:8080', '10.0.0.1:8080'])).toBe('(10\\\\.0\\\\.0\\\\.1:8080|10\\\\.0\\\\.0\\\\.2:8080)');
    expect(allValueOf(v, ['gw'])).toBe('gw');
    expect(allValueOf({ ...v, allValue: '.+' }, ['gw'])).toBe('.+');
  });
});

describe('relabeling and matchers, as Prometheus applies them', () => {
  it('keeps, replaces and maps labels with anchored regexes', () => {
    const rules = [
      { source_labels: ['__meta_scrape'], action: 'keep', regex: 'true' },
      {
        source_labels: ['__address__', '__meta_port'],
        regex: '([^:]+)(?::\\d+)?;(\\d+)',
        replacement: '$1:$2',
        target_label: '__address__',
      },
      { action: 'labelmap', regex: '__meta_label_(.+)' },
      { source_labels: ['__meta_job'], regex: '(.+)', target_label: 'job' },
    ];
    expect(
      relabel(
        {
          job: 'pods',
          __address__: '10.0.0.1:80',
          __meta_scrape: 'true',
          __meta_port: '8080',
          __meta_label_app: 'gw',
          __meta_job: 'compaction-gateway',
        },
        rules,
      ),
    ).toMatchObject({
      job: 'compaction-gateway',
      __address__: '10.0.0.1:8080',
      app: 'gw',
    });
    // Anchored: "truey" is not "true"; an empty source leaves the job as it was.
    expect(relabel({ __meta_scrape: 'truey' }, rules)).toBeUndefined();
    expect(relabel({ job: 'pods', __address__: 'a:1', __meta_scrape: 'true', __meta_port: '2' }, rules)).toMatchObject({
      job: 'pods',
      __address__: 'a:2',
    });
  });

  it('matches a selector as PromQL does', () => {
    expect(matches(parseMatchers('job="compaction-gateway"'), { job: 'compaction-gateway' })).toBe(true);
    expect(matches(parseMatchers('job="compaction-gateway"'), { job: 'kubernetes-pods' })).toBe(false);
    expect(matches(parseMatchers('job=~"compaction-gateway|llm"'), { job: 'llm' })).toBe(true);
    expect(matches(parseMatchers('job=~"compaction"'), { job: 'compaction-gateway' })).toBe(false);
    expect(() => parseMatchers('job=compaction-gateway')).toThrow(/cannot read/);
  });
});
