// deploy/kubernetes's pieces fit together and fit the gateway: each gateway container's config and
// env load, probes, grace, references, the alternative ConfigMap, the Kubernetes version each
// manifest states, and the Prometheus Operator's monitors. A planted fault of each kind is named.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kubernetesDocuments, type K8sDoc } from '../../scripts/deploy/kubernetes.js';
import { DEPLOY, alternativeConfigMapsProblems, kubernetesVersionProblems, monitorsProblems, workloadsProblems } from './cross-checks.js';

const docs = () => kubernetesDocuments(join(DEPLOY, 'kubernetes'));
const named = (all: K8sDoc[], kind: string, name: string) => {
  const doc = all.find((d) => d.obj.kind === kind && d.obj.metadata.name === name);
  if (!doc) throw new Error(`no ${kind}/${name} in deploy/kubernetes`);
  return doc.obj;
};
/** The gateway container of the shared Deployment. */
const sharedGateway = (all: K8sDoc[]) => named(all, 'Deployment', 'compaction-gateway').spec.template.spec.containers[0];

describe('the Kubernetes manifests', () => {
  it('pass as they are', () => {
    const all = docs();
    expect(all.filter((d) => d.obj.kind === 'Deployment').length).toBeGreaterThan(1);
    expect(workloadsProblems(all)).toEqual([]);
    expect(alternativeConfigMapsProblems(all)).toEqual([]);
    expect(kubernetesVersionProblems(all)).toEqual([]);
    expect(monitorsProblems(all).problems).toEqual([]);
    expect(monitorsProblems(all).jobs.map((j) => j.job)).toEqual(['compaction-gateway', 'compaction-gateway']);
  });

  it('name a probe off the port, a grace the drain outlasts, a key not from a Secret and a missing Secret key', () => {
    const all = docs();
    const gateway = sharedGateway(all);
    gateway.readinessProbe.httpGet.path = '/healthz';
    named(all, 'Deployment', 'compaction-gateway').spec.template.spec.terminationGracePeriodSeconds = 30;
    const key = gateway.env.find((e: any) => e.name === 'UPSTREAM_API_KEY');
    key.value = 'sk-in-the-manifest';
    delete key.valueFrom;
    gateway.env.push({ name: 'GATEWAY_API_KEYS', valueFrom: { secretKeyRef: { name: 'compaction-gateway', key: 'no-such-key' } } });
    const problems = workloadsProblems(all);
    const where = 'deploy/kubernetes/shared/gateway.yaml Deployment/compaction-gateway';
    expect(problems).toEqual(
      expect.arrayContaining([
        `${where} container ${gateway.name}: readinessProbe asks /healthz, not /readyz`,
        `${where} container ${gateway.name}: terminationGracePeriodSeconds 30 is not longer than preStop 5 s + server.shutdownGraceMs 30 s`,
        `${where} container ${gateway.name}: UPSTREAM_API_KEY does not come from a Secret`,
        `${where}: ${gateway.name} env GATEWAY_API_KEYS refers to key no-such-key, not in Secret compaction-gateway`,
      ]),
    );
  });

  it('name an alternative ConfigMap whose config no longer loads in the workload it replaces', () => {
    const all = docs();
    const alt = named(all, 'ConfigMap', 'compaction-gateway-config-upstreams');
    const [key] = Object.keys(alt.data);
    alt.data[key] = `${alt.data[key]}\nnoSuchKey: 1\n`;
    expect(
      alternativeConfigMapsProblems(all).some(
        (p) => p.includes('with ConfigMap compaction-gateway-config-upstreams') && /noSuchKey/.test(p),
      ),
    ).toBe(true);
  });

  it("name a feature newer than the Kubernetes version a manifest's header states", () => {
    const all = docs();
    // The sidecar's header says 1.29 (native sidecars); a preStop sleep needs 1.30.
    const agent = all.find((d) => d.file.endsWith('sidecar/agent.yaml') && d.obj.kind === 'Deployment')!.obj;
    agent.spec.template.spec.initContainers[0].lifecycle = { preStop: { sleep: { seconds: 5 } } };
    expect(kubernetesVersionProblems(all)).toEqual([
      'deploy/kubernetes/sidecar/agent.yaml: its header says Kubernetes 1.29, but it uses a lifecycle sleep action (PodLifecycleSleepAction), on by default only from 1.30',
    ]);
  });

  it('name a monitor on the wrong path, and one that sends no key to a gateway that asks for one', () => {
    const all = docs();
    all.find((d) => d.obj.kind === 'PodMonitor')!.obj.spec.podMetricsEndpoints[0].path = '/stats';
    sharedGateway(all).env.push({
      name: 'GATEWAY_METRICS_KEY',
      valueFrom: { secretKeyRef: { name: 'compaction-gateway', key: 'metrics-key' } },
    });
    const operator = 'deploy/kubernetes/prometheus-operator';
    expect(monitorsProblems(all).problems).toEqual([
      `${operator}/podmonitor.yaml PodMonitor/compaction-gateway-sidecar endpoint 0 -> Deployment/coding-agent: path /stats, not /metrics`,
      `${operator}/servicemonitor.yaml ServiceMonitor/compaction-gateway endpoint 0 -> Service/compaction-gateway: the gateway compaction-gateway asks for GATEWAY_METRICS_KEY (Secret compaction-gateway key metrics-key), and the endpoint sends no authorization: every scrape is refused`,
    ]);
  });
});
