// The deploy assets' cross-checks, the project's own (no validator knows them): the pieces under
// deploy/ against each other and against the gateway itself. Each returns the problems it finds;
// test/deploy/compose.test.ts, kubernetes.test.ts and alerts.test.ts assert none on the real
// files and name each on a planted fault. The standard validators (docker-compose config, the
// Compose and Kubernetes schemas, promtool) run in `npm run check:deploy`.
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { parse as parseToml } from 'smol-toml';
import { ConfigError, ENV_NAMES, loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { openGatewayRefusal } from '../../src/process/startup.js';
import type { K8sDoc } from '../../scripts/deploy/kubernetes.js';
import { baseMetricName, dashboardQueries, metricNames, selectors } from '../../scripts/deploy/promql.js';
import { fromOperator, matches, parseMatchers, podTargetLabels, relabel, type Matcher } from './relabel.js';
import { composeHostCheck, isServiceName, upstreamProblems, variablesNamedIn } from './upstreams.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const DEPLOY = join(ROOT, 'deploy');
const DASHBOARD = join(DEPLOY, 'grafana', 'compaction-gateway.json');

/** Variables the gateway's process reads besides its config keys' (src/main.ts, the image). */
const OTHER_GATEWAY_ENV = new Set([
  'CONFIG',
  'NODE_ENV',
  'NODE_OPTIONS',
  'TZ',
  'NODE_EXTRA_CA_CERTS',
  // Egress (src/upstream/egress.ts), lower-case names too, as curl and undici read them.
  'HTTPS_PROXY',
  'https_proxy',
  'HTTP_PROXY',
  'http_proxy',
  'NO_PROXY',
  'no_proxy',
]);
const GATEWAY_ENV = new Set([...ENV_NAMES, ...OTHER_GATEWAY_ENV]);
/** What a secret's value is replaced with when a config is loaded here. */
const SECRET_STAND_IN = 'from-a-secret';

function durationMs(value: unknown): number {
  if (typeof value === 'number') return value * 1000;
  const m = /^(\d+)(ms|s|m|h)$/.exec(String(value));
  if (!m) return NaN;
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
}

/**
 * Loads a gateway config the way the gateway does (file, then environment), returning the config
 * or the loader's problems. Unknown variable names are problems too: the gateway ignores them.
 * A variable this file names as ${NAME} is read, so it is known; one only another file names is not.
 * So is an open gateway (the provider key, no gateway key, beyond loopback): it refuses to start.
 */
function loadGatewayConfig(file: string, env: Record<string, string>): { config?: Readonly<Config>; problems: string[] } {
  const named = existsSync(file) ? variablesNamedIn(readFileSync(file, 'utf8')) : new Set<string>();
  const problems = Object.keys(env)
    .filter((name) => !GATEWAY_ENV.has(name) && !named.has(name))
    .map(
      (name) =>
        `environment variable ${name} is neither one the gateway reads nor one its config file names as \${${name}} (the gateway reads ${[...GATEWAY_ENV].join(', ')})`,
    );
  try {
    const config = loadConfig(['--config', file], env);
    const refusal = openGatewayRefusal(config);
    return refusal ? { problems: [...problems, refusal.replace(/ Do one of: .*$/, '')] } : { config, problems };
  } catch (err) {
    if (err instanceof ConfigError) return { problems: [...problems, ...err.problems] };
    throw err;
  }
}

// --- compose -------------------------------------------------------------------------------

// --- compose -------------------------------------------------------------------------------

/**
 * The services of a compose setup, as `docker-compose config` prints them (variables filled in,
 * bind mounts absolute), fit together: the gateway's config loads, Prometheus scrapes it under a
 * job CompactionGatewayDown selects, Grafana shows the dashboard, the agent reaches the gateway.
 */
export function composeProblems(compose: any, alerts: unknown): string[] {
  const services: Record<string, any> = compose.services ?? {};
  const problems: string[] = [];
  for (const name of ['gateway', 'redis', 'prometheus', 'grafana', 'agent']) if (!services[name]) problems.push(`no ${name} service`);
  if (problems.length > 0) return problems;

  // Bind mounts: docker-compose config resolves them to absolute "source:target[:mode]" paths.
  const mounts = (service: any) =>
    (service.volumes ?? [])
      .map((v: any) => (typeof v === 'string' ? v.split(':') : [v.source, v.target, v.read_only ? 'ro' : 'rw']))
      .filter(([source]: string[]) => source?.startsWith('/'))
      .map(([source, target]: string[]) => ({ source, target }));
  for (const [name, service] of Object.entries(services)) {
    for (const { source } of mounts(service)) {
      if (!existsSync(source)) problems.push(`${name}: mounts ${relative(ROOT, source)}, which does not exist`);
    }
  }

  // The gateway: its config file and environment, as the gateway itself loads them.
  const gateway = services.gateway;
  const env: Record<string, string> = Object.fromEntries(
    Object.entries(gateway.environment ?? {}).map(([k, v]) => [k, v === null || v === undefined ? '' : String(v)]),
  );
  const configMount = mounts(gateway).find((m: { target: string }) => m.target === env.CONFIG);
  if (!configMount) return [...problems, `gateway: CONFIG=${env.CONFIG} is not a mounted file`];
  const { config, problems: configProblems } = loadGatewayConfig(configMount.source, env);
  problems.push(...configProblems.map((p) => `gateway config: ${p}`));
  if (!config) return problems;
  const { upstreams, problems: upstreamsProblems } = upstreamProblems(config, composeHostCheck(services, gateway));
  problems.push(...upstreamsProblems.map((p) => `gateway config: ${p}`));
  const port = config.server.port;
  if (['127.0.0.1', 'localhost', '::1'].includes(config.server.host)) {
    problems.push(`gateway: server.host ${config.server.host} is unreachable from the other containers (Prometheus)`);
  }
  // "127.0.0.1:8080:8080/tcp" (docker-compose 1.x) or { target: 8080, published: ... } (Compose v2).
  const published = (gateway.ports ?? []).map((p: any) => Number(typeof p === 'string' ? p.split(':').pop()!.split('/')[0] : p.target));
  if (!published.includes(port)) problems.push(`gateway: publishes ${published.join(', ')}, listens on ${port}`);
  const stopMs = durationMs(gateway.stop_grace_period ?? '10s');
  if (!(stopMs > config.server.shutdownGraceMs)) {
    problems.push(
      `gateway: stop_grace_period ${gateway.stop_grace_period ?? '10s (default)'} is not longer than server.shutdownGraceMs ${config.server.shutdownGraceMs}`,
    );
  }
  const redisUrl = config.memory.redisUrl;
  if (!redisUrl) problems.push('gateway: memory.redisUrl is not set, so Redis is unused');
  else if (!services[new URL(redisUrl).hostname]) problems.push(`gateway: memory.redisUrl ${redisUrl} names no service`);
  if (!gateway.healthcheck?.test?.join(' ').includes(`:${port}/readyz`))
    problems.push('gateway: the healthcheck does not ask /readyz on its port');

  // Prometheus scrapes the gateway (`npm run check:deploy` runs promtool on this file).
  const prometheus = services.prometheus;
  const configArg = (prometheus.command ?? []).find((a: string) => a.startsWith('--config.file='));
  const promConfigPath = configArg ? configArg.split('=')[1] : '/etc/prometheus/prometheus.yml';
  const promMount = mounts(prometheus).find((m: { target: string }) => m.target === promConfigPath);
  if (!promMount || !existsSync(promMount.source)) problems.push(`prometheus: nothing is mounted at ${promConfigPath}`);
  else {
    const promConfig = parseYaml(readFileSync(promMount.source, 'utf8'));
    const targets: string[] = (promConfig.scrape_configs ?? []).flatMap((s: any) =>
      (s.static_configs ?? []).flatMap((c: any) => c.targets ?? []),
    );
    if (!targets.includes(`gateway:${port}`)) problems.push(`prometheus: scrapes ${targets.join(', ') || 'nothing'}, not gateway:${port}`);
    // Its job is one CompactionGatewayDown selects (alerts.yaml's header says how to change that).
    const down = downSelector(alerts);
    problems.push(...down.problems);
    for (const s of (promConfig.scrape_configs ?? []).filter((s: any) =>
      (s.static_configs ?? []).some((c: any) => (c.targets ?? []).includes(`gateway:${port}`)),
    )) {
      const labels = relabel(
        { job: s.job_name, __address__: `gateway:${port}`, __metrics_path__: s.metrics_path ?? '/metrics' },
        s.relabel_configs ?? [],
      );
      if (!labels || !matches(down.matchers, labels))
        problems.push(
          `prometheus: scrape job ${s.job_name} gives the gateway job="${labels?.job}", which CompactionGatewayDown's ${down.text} does not select`,
        );
    }
  }

  // Grafana: provisioning files, the dashboard's path, the data source's address.
  const grafana = services.grafana;
  const grafanaMounts = mounts(grafana);
  const provisioning = grafanaMounts.find((m: { target: string }) => m.target === '/etc/grafana/provisioning');
  const dashboardMount = grafanaMounts.find((m: { source: string }) => m.source === DASHBOARD);
  if (!provisioning) problems.push('grafana: no provisioning folder at /etc/grafana/provisioning');
  if (!dashboardMount) problems.push(`grafana: ${relative(ROOT, DASHBOARD)} is not mounted`);
  if (provisioning && dashboardMount) {
    const providers = readdirSync(join(provisioning.source, 'dashboards'))
      .filter((f) => /\.ya?ml$/.test(f))
      .flatMap((f) => parseYaml(readFileSync(join(provisioning.source, 'dashboards', f), 'utf8')).providers ?? []);
    if (!providers.some((p: any) => p.options?.path === posix.dirname(dashboardMount.target))) {
      problems.push(`grafana: no dashboard provider reads ${posix.dirname(dashboardMount.target)}, where the dashboard is mounted`);
    }
    const sources = readdirSync(join(provisioning.source, 'datasources'))
      .filter((f) => /\.ya?ml$/.test(f))
      .flatMap((f) => parseYaml(readFileSync(join(provisioning.source, 'datasources', f), 'utf8')).datasources ?? []);
    const prom = sources.find((s: any) => s.type === 'prometheus');
    if (!prom) problems.push('grafana: no Prometheus data source is provisioned');
    else if (new URL(prom.url).host !== 'prometheus:9090')
      problems.push(`grafana: the data source points at ${prom.url}, not the prometheus service`);
    if (grafana.environment?.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH !== dashboardMount.target) {
      problems.push('grafana: the home dashboard is not the mounted dashboard');
    }
  }

  // The agent: in the gateway's network namespace, configured for 127.0.0.1 and the gateway's port.
  const agent = services.agent;
  if (agent.network_mode !== 'service:gateway') problems.push(`agent: network_mode is ${agent.network_mode}, not service:gateway`);
  const codex = mounts(agent).find((m: { target: string }) => m.target.endsWith('/config.toml'));
  if (!codex) problems.push('agent: no Codex config.toml is mounted');
  else if (existsSync(codex.source)) {
    const toml: any = parseToml(readFileSync(codex.source, 'utf8'));
    const provider = toml.model_providers?.[toml.model_provider];
    if (provider?.base_url !== `http://127.0.0.1:${port}/v1`)
      problems.push(`agent: Codex's base_url is ${provider?.base_url}, not http://127.0.0.1:${port}/v1`);
    if (provider?.env_key && !agent.environment?.[provider.env_key])
      problems.push(`agent: ${provider.env_key} (Codex's env_key) is not set`);
    else if (provider?.env_key && config.auth.keys.length > 0 && !config.auth.keys.includes(agent.environment[provider.env_key])) {
      problems.push(`agent: ${provider.env_key} (Codex's env_key) is not one of the gateway's keys (GATEWAY_API_KEYS)`);
    }
    if (agent.environment?.CODEX_HOME !== posix.dirname(codex.target))
      problems.push('agent: CODEX_HOME is not where config.toml is mounted');
    // Its base URL has no upstream prefix: routes or the default upstream must take its requests.
    const api = provider?.wire_api === 'chat' ? 'chat' : 'responses';
    const picked = upstreams.pick(api, toml.model);
    if ('refused' in picked) problems.push(`agent: Codex's ${api} requests to /v1 reach no upstream: ${picked.refused}`);
  }
  return problems;
}

// --- kubernetes ----------------------------------------------------------------------------

type Find = (dir: string, kind: string, name: string) => K8sDoc | undefined;

/** An object of that kind and name beside `dir`'s files, or in deploy/kubernetes itself (the Secret). */
function finder(docs: K8sDoc[]): Find {
  return (dir, kind, name) =>
    docs.find(
      (d) =>
        d.obj.kind === kind && d.obj.metadata?.name === name && (dirname(d.file) === dir || dirname(d.file) === join(DEPLOY, 'kubernetes')),
    );
}

const isWorkload = (d: K8sDoc) => ['Deployment', 'StatefulSet', 'Job', 'DaemonSet'].includes(d.obj.kind);
const isGatewayImage = (image: unknown) => /(^|\/)compaction-gateway(:|@|$)/.test(String(image ?? ''));

/**
 * One workload's pod: every Secret and ConfigMap it refers to exists, and each gateway container's
 * config and env load and fit the pod. `where` names the workload in each problem.
 */
function workloadProblems({ file, obj }: K8sDoc, find: Find, where: string): { problems: string[]; gateways: number } {
  const dir = dirname(file);
  const problems: string[] = [];
  let gateways = 0;
  const pod = obj.spec.template.spec;
  const all = [
    ...(pod.initContainers ?? []).map((c: any) => ({ c, init: true })),
    ...(pod.containers ?? []).map((c: any) => ({ c, init: false })),
  ];

  // Every Secret and ConfigMap the pod refers to exists, with the key.
  for (const { c } of all) {
    for (const e of c.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef ?? e.valueFrom?.configMapKeyRef;
      if (!ref) continue;
      const kind = e.valueFrom.secretKeyRef ? 'Secret' : 'ConfigMap';
      const target = find(dir, kind, ref.name);
      const data = { ...(target?.obj.data ?? {}), ...(target?.obj.stringData ?? {}) };
      if (!target) problems.push(`${where}: ${c.name} env ${e.name} refers to ${kind} ${ref.name}, which is not in deploy/kubernetes`);
      else if (!(ref.key in data)) problems.push(`${where}: ${c.name} env ${e.name} refers to key ${ref.key}, not in ${kind} ${ref.name}`);
    }
  }
  for (const v of pod.volumes ?? []) {
    if (v.configMap && !find(dir, 'ConfigMap', v.configMap.name))
      problems.push(`${where}: volume ${v.name} mounts ConfigMap ${v.configMap.name}, which does not exist`);
  }
  // An upstream's host: a single-label name is a Service here; Docker's name for its host means nothing in a pod.
  const hostCheck = (host: string) =>
    host === 'host.docker.internal'
      ? "is Docker's name for its host; a pod has no such name"
      : isServiceName(host) && !find(dir, 'Service', host)
        ? `names no Service in ${relative(ROOT, dir)}`
        : undefined;

  for (const { c, init } of all) {
    if (!isGatewayImage(c.image)) continue;
    gateways++;
    const cw = `${where} container ${c.name}`;
    if (init && c.restartPolicy !== 'Always')
      problems.push(`${cw}: an init container without restartPolicy: Always never lets the pod start (it must be a native sidecar)`);
    const env: Record<string, string> = {};
    for (const e of c.env ?? []) env[e.name] = e.value ?? (e.valueFrom?.secretKeyRef ? SECRET_STAND_IN : '');
    // The config file: CONFIG must point into a ConfigMap volume holding that key.
    let configFile: string | undefined;
    const tmp = mkdtempSync(join(tmpdir(), 'deploy-k8s-'));
    try {
      if (!env.CONFIG) problems.push(`${cw}: no CONFIG variable: the gateway would run with its shipped default.yaml`);
      else {
        const mount = (c.volumeMounts ?? []).find((m: any) => env.CONFIG.startsWith(`${m.mountPath.replace(/\/$/, '')}/`));
        const volume = mount && (pod.volumes ?? []).find((v: any) => v.name === mount.name);
        const configMap = volume?.configMap && find(dir, 'ConfigMap', volume.configMap.name);
        const key = mount && posix.relative(mount.mountPath, env.CONFIG);
        if (!configMap) problems.push(`${cw}: CONFIG=${env.CONFIG} is not in a mounted ConfigMap`);
        else if (typeof configMap.obj.data?.[key] !== 'string')
          problems.push(`${cw}: ConfigMap ${volume.configMap.name} has no key ${key}`);
        else {
          configFile = join(tmp, 'config.yaml');
          writeFileSync(configFile, configMap.obj.data[key]);
        }
      }
      const { config, problems: configProblems } = configFile ? loadGatewayConfig(configFile, env) : { config: undefined, problems: [] };
      problems.push(...configProblems.map((p) => `${cw} config: ${p}`));
      if (!config) continue;
      const { upstreams, problems: upstreamsProblems } = upstreamProblems(config, hostCheck);
      problems.push(...upstreamsProblems.map((p) => `${cw} config: ${p}`));

      // Probes reach the configured port on /healthz and /readyz.
      const portOf = (p: number | string) => (typeof p === 'number' ? p : (c.ports ?? []).find((q: any) => q.name === p)?.containerPort);
      for (const [probe, path] of [
        ['livenessProbe', '/healthz'],
        ['readinessProbe', '/readyz'],
      ] as const) {
        const get = c[probe]?.httpGet;
        if (!get) problems.push(`${cw}: no ${probe} httpGet`);
        else {
          if (get.path !== path) problems.push(`${cw}: ${probe} asks ${get.path}, not ${path}`);
          if (portOf(get.port) !== config.server.port)
            problems.push(`${cw}: ${probe} port ${get.port} is not server.port ${config.server.port}`);
        }
      }
      if (['127.0.0.1', 'localhost', '::1'].includes(config.server.host))
        problems.push(`${cw}: server.host ${config.server.host}: the kubelet's probes come to the pod IP`);
      for (const r of ['requests.cpu', 'requests.memory', 'limits.memory']) {
        const [a, b] = r.split('.');
        if (!c.resources?.[a]?.[b]) problems.push(`${cw}: no resources.${r}`);
      }
      const graceMs = (pod.terminationGracePeriodSeconds ?? 30) * 1000;
      const preStopMs = (c.lifecycle?.preStop?.sleep?.seconds ?? 0) * 1000;
      if (!(graceMs > preStopMs + config.server.shutdownGraceMs)) {
        problems.push(
          `${cw}: terminationGracePeriodSeconds ${graceMs / 1000} is not longer than preStop ${preStopMs / 1000} s + server.shutdownGraceMs ${config.server.shutdownGraceMs / 1000} s`,
        );
      }
      if (!env.UPSTREAM_API_KEY || env.UPSTREAM_API_KEY !== SECRET_STAND_IN)
        problems.push(`${cw}: UPSTREAM_API_KEY does not come from a Secret`);
      // A named upstream's key too: written in the ConfigMap or in a plain env value, anyone who reads the manifests has it.
      for (const u of upstreams.all) {
        if (u.name !== 'default' && u.apiKey !== undefined && u.apiKey !== SECRET_STAND_IN)
          problems.push(`${cw}: ${u.apiKeyKey} does not come from a Secret`);
      }
      // Redis, when used, is a Service here with that port.
      if (config.memory.redisUrl) {
        const url = new URL(config.memory.redisUrl);
        const service = find(dir, 'Service', url.hostname);
        if (!service) problems.push(`${cw}: memory.redisUrl ${config.memory.redisUrl} names no Service`);
        else if (!service.obj.spec.ports.some((p: any) => p.port === Number(url.port || 6379)))
          problems.push(`${cw}: Service ${url.hostname} has no port ${url.port || 6379}`);
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  return { problems, gateways };
}

/** The gateway in each workload, and every Service's selector and target port. */
export function workloadsProblems(docs: K8sDoc[]): string[] {
  const find = finder(docs);
  const problems: string[] = [];
  const workloads = docs.filter(isWorkload);
  let gateways = 0;
  for (const w of workloads) {
    const r = workloadProblems(w, find, `${relative(ROOT, w.file)} ${w.obj.kind}/${w.obj.metadata.name}`);
    problems.push(...r.problems);
    gateways += r.gateways;
  }
  // Every Service selects a workload's pods, on a port they have.
  for (const { file, obj } of docs.filter((d) => d.obj.kind === 'Service')) {
    const where = `${relative(ROOT, file)} Service/${obj.metadata.name}`;
    const selector: Record<string, string> = obj.spec.selector ?? {};
    const targets = workloads.filter(
      (w) =>
        dirname(w.file) === dirname(file) && Object.entries(selector).every(([k, v]) => w.obj.spec.template.metadata?.labels?.[k] === v),
    );
    if (targets.length === 0) problems.push(`${where}: its selector matches no workload's pods`);
    for (const port of obj.spec.ports ?? []) {
      const ok = targets.some((w) =>
        [...(w.obj.spec.template.spec.containers ?? []), ...(w.obj.spec.template.spec.initContainers ?? [])].some((c: any) =>
          (c.ports ?? []).some((p: any) =>
            typeof port.targetPort === 'string' ? p.name === port.targetPort : p.containerPort === (port.targetPort ?? port.port),
          ),
        ),
      );
      if (!ok) problems.push(`${where}: targetPort ${port.targetPort} is no container port of the selected pods`);
    }
  }
  if (gateways === 0) problems.push('no gateway container found in deploy/kubernetes');
  return problems;
}

/**
 * The env entries a ConfigMap's header tells the reader to add, as YAML indented under a line
 * ending "add to the container's env:" (configmap-upstreams.yaml). None when it says nothing.
 */
function headerEnv(file: string): { env: any[]; problems: string[] } {
  const header: string[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('#')) break;
    header.push(line.replace(/^# ?/, ''));
  }
  const at = header.findIndex((l) => /add to the container's env:\s*$/.test(l));
  if (at < 0) return { env: [], problems: [] };
  const indent = (l: string) => l.length - l.trimStart().length;
  const block: string[] = [];
  for (const line of header.slice(at + 1)) {
    if (line.trim() === '' || indent(line) <= indent(header[at])) break;
    block.push(line);
  }
  let env: unknown;
  try {
    env = parseYaml(block.join('\n'));
  } catch (err) {
    return { env: [], problems: [`its header's env to add is not YAML: ${(err as Error).message.split('\n')[0]}`] };
  }
  if (env === null || env === undefined) return { env: [], problems: [] };
  if (!Array.isArray(env) || env.some((e) => typeof e?.name !== 'string'))
    return { env: [], problems: ["its header's env to add is not a list of { name, value | valueFrom }"] };
  return { env, problems: [] };
}

/**
 * A ConfigMap no workload mounts (configmap-upstreams.yaml) swapped into the workload beside it
 * whose ConfigMap has its keys, with the env its header says to add, checked as that workload.
 */
export function alternativeConfigMapsProblems(docs: K8sDoc[]): string[] {
  const find = finder(docs);
  const workloads = docs.filter(isWorkload);
  const problems: string[] = [];
  const mountedBy = (w: K8sDoc) => (w.obj.spec.template.spec.volumes ?? []).filter((v: any) => v.configMap);
  const mounted = new Set(workloads.flatMap((w) => mountedBy(w).map((v: any) => `${dirname(w.file)}\0${v.configMap.name}`)));
  const alternatives = docs.filter((d) => d.obj.kind === 'ConfigMap' && !mounted.has(`${dirname(d.file)}\0${d.obj.metadata.name}`));
  for (const alt of alternatives) {
    const name = alt.obj.metadata.name;
    const where = `${relative(ROOT, alt.file)} ConfigMap/${name}`;
    const keys = Object.keys(alt.obj.data ?? {})
      .sort()
      .join(', ');
    const header = headerEnv(alt.file);
    problems.push(...header.problems.map((p) => `${where}: ${p}`));
    if (
      !readFileSync(alt.file, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('#'))
        .some((l) => l.includes(name))
    ) {
      problems.push(`${where}: no workload mounts it, and its header does not say how to (it never names ${name})`);
    }
    // It takes the place of a ConfigMap with the same keys, in a workload beside it running the gateway.
    let replaced = 0;
    for (const w of workloads.filter((w) => dirname(w.file) === dirname(alt.file))) {
      const pod = w.obj.spec.template.spec;
      const volumes = mountedBy(w).filter(
        (v: any) =>
          Object.keys(find(dirname(w.file), 'ConfigMap', v.configMap.name)?.obj.data ?? {})
            .sort()
            .join(', ') === keys,
      );
      const containers = [...(pod.initContainers ?? []), ...(pod.containers ?? [])].filter((c: any) => isGatewayImage(c.image));
      if (volumes.length === 0 || containers.length === 0) continue;
      replaced++;
      const variant = structuredClone(w.obj);
      const vpod = variant.spec.template.spec;
      for (const v of vpod.volumes) if (volumes.some((o: any) => o.name === v.name)) v.configMap.name = name;
      const added = new Set(header.env.map((e) => e.name));
      for (const c of [...(vpod.initContainers ?? []), ...(vpod.containers ?? [])].filter((c: any) => isGatewayImage(c.image))) {
        c.env = [...(c.env ?? []).filter((e: any) => !added.has(e.name)), ...structuredClone(header.env)];
      }
      const r = workloadProblems(
        { file: w.file, obj: variant },
        find,
        `${relative(ROOT, w.file)} ${w.obj.kind}/${w.obj.metadata.name} with ConfigMap ${name}${added.size ? ` and env ${[...added].join(', ')}` : ''}`,
      );
      problems.push(...r.problems);
    }
    if (replaced === 0)
      problems.push(
        `${where}: no workload mounts it, and none beside it runs the gateway with a ConfigMap of its keys (${keys}) that it could replace`,
      );
  }
  return problems;
}

/** Kubernetes versions from which a feature the manifests use is on by default. */
const KUBERNETES_FEATURES: Array<{ what: string; since: [number, number]; used: (pod: any) => boolean }> = [
  {
    what: 'a lifecycle sleep action (PodLifecycleSleepAction)',
    since: [1, 30],
    used: (pod) =>
      [...(pod.containers ?? []), ...(pod.initContainers ?? [])].some(
        (c: any) => c.lifecycle?.preStop?.sleep || c.lifecycle?.postStart?.sleep,
      ),
  },
  {
    what: 'a native sidecar (an init container with restartPolicy: Always)',
    since: [1, 29],
    used: (pod) => (pod.initContainers ?? []).some((c: any) => c.restartPolicy === 'Always'),
  },
];

/** A manifest's header states a Kubernetes version that has every feature its pods use. */
export function kubernetesVersionProblems(docs: K8sDoc[]): string[] {
  const problems: string[] = [];
  const workloads = docs.filter(isWorkload);
  for (const file of [...new Set(workloads.map((d) => d.file))]) {
    const pods = workloads.filter((d) => d.file === file).map((d) => d.obj.spec.template.spec);
    const used = KUBERNETES_FEATURES.filter((f) => pods.some(f.used));
    if (used.length === 0) continue;
    const need = used.reduce((a, f) => (f.since[1] > a.since[1] ? f : a));
    const header = readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('#'))
      .join(' ');
    const stated = [...header.matchAll(/Kubernetes (\d+)\.(\d+)/g)].map((m) => [Number(m[1]), Number(m[2])] as const);
    const where = relative(ROOT, file);
    if (stated.length === 0)
      problems.push(
        `${where}: uses ${need.what}, on by default from Kubernetes ${need.since.join('.')}, and its header states no Kubernetes version`,
      );
    for (const [major, minor] of stated) {
      if (major < need.since[0] || (major === need.since[0] && minor < need.since[1])) {
        problems.push(
          `${where}: its header says Kubernetes ${major}.${minor}, but it uses ${need.what}, on by default only from ${need.since.join('.')}`,
        );
      }
    }
  }
  return problems;
}

/** The objects a label selector (matchLabels only) picks among `labelled`, by the labels `labelsOf` gives. */
function selected<T>(
  selector: any,
  labelled: T[],
  labelsOf: (t: T) => Record<string, string> | undefined,
  where: string,
  problems: string[],
): T[] {
  if (selector?.matchExpressions?.length) problems.push(`${where}: matchExpressions: this check reads matchLabels only`);
  const wanted = Object.entries<string>(selector?.matchLabels ?? {});
  if (wanted.length === 0) problems.push(`${where}: selects by no label, so it takes in every Service or pod of the namespace`);
  return labelled.filter((t) => wanted.every(([k, v]) => labelsOf(t)?.[k] === v));
}

/** The gateway containers of a workload's pod, each with its container ports. */
function gatewayContainers(w: K8sDoc): Array<{ c: any; init: boolean }> {
  const pod = w.obj.spec.template.spec;
  return [
    ...(pod.initContainers ?? []).map((c: any) => ({ c, init: true })),
    ...(pod.containers ?? []).map((c: any) => ({ c, init: false })),
  ].filter(({ c }) => isGatewayImage(c.image));
}

/**
 * What a monitor's endpoint sends as a scrape key against what the gateway asks: with
 * GATEWAY_METRICS_KEY from a Secret, the endpoint's authorization (or bearerTokenSecret) is that
 * Secret's key; without it, none (a key sent for nothing reads as if /metrics were protected).
 */
function scrapeKeyProblems(endpoint: any, gateway: any, find: Find, where: string): string[] {
  const problems: string[] = [];
  const env = (gateway.env ?? []).find((e: any) => e.name === 'GATEWAY_METRICS_KEY');
  const sent = endpoint.authorization?.credentials ?? endpoint.bearerTokenSecret;
  const type = endpoint.authorization?.type ?? 'Bearer';
  if (sent) {
    const secret = find(join(DEPLOY, 'kubernetes'), 'Secret', sent.name);
    if (!secret) problems.push(`${where}: its scrape key refers to Secret ${sent.name}, which is not in deploy/kubernetes`);
    else if (!(sent.key in { ...(secret.obj.data ?? {}), ...(secret.obj.stringData ?? {}) }))
      problems.push(`${where}: its scrape key refers to key ${sent.key}, not in Secret ${sent.name}`);
  }
  if (!env) {
    if (sent)
      problems.push(
        `${where}: sends Secret ${sent.name} key ${sent.key} as a scrape key, and the gateway ${gateway.name} sets no GATEWAY_METRICS_KEY`,
      );
    return problems;
  }
  const ref = env.valueFrom?.secretKeyRef;
  if (!ref) problems.push(`${where}: the gateway ${gateway.name}'s GATEWAY_METRICS_KEY does not come from a Secret`);
  else if (!sent)
    problems.push(
      `${where}: the gateway ${gateway.name} asks for GATEWAY_METRICS_KEY (Secret ${ref.name} key ${ref.key}), and the endpoint sends no authorization: every scrape is refused`,
    );
  else if (sent.name !== ref.name || sent.key !== ref.key)
    problems.push(
      `${where}: sends Secret ${sent.name} key ${sent.key}; the gateway ${gateway.name} reads GATEWAY_METRICS_KEY from Secret ${ref.name} key ${ref.key}`,
    );
  else if (type !== 'Bearer') problems.push(`${where}: authorization type ${type}: the gateway takes its metrics key as Bearer`);
  return problems;
}

/** The job label each monitor gives the gateway's targets, as the Operator writes its scrape config. */
interface MonitorJob {
  where: string;
  job: string | undefined;
}

/**
 * The ServiceMonitor and PodMonitor select the gateway's Service or pods, on its probed port, at
 * /metrics, sending the metrics key's Secret exactly when the gateway asks for one.
 */
export function monitorsProblems(docs: K8sDoc[]): { problems: string[]; jobs: MonitorJob[] } {
  const find = finder(docs);
  const problems: string[] = [];
  const jobs: MonitorJob[] = [];
  const workloads = docs.filter(isWorkload);
  const podsOf = (labels: Record<string, string>) =>
    workloads.filter((w) => Object.entries(labels).every(([k, v]) => w.obj.spec.template.metadata?.labels?.[k] === v));
  const monitors = docs.filter(
    (d) => d.obj.apiVersion === 'monitoring.coreos.com/v1' && ['ServiceMonitor', 'PodMonitor'].includes(d.obj.kind),
  );
  for (const { file, obj } of monitors) {
    const where = `${relative(ROOT, file)} ${obj.kind}/${obj.metadata.name}`;
    const namespace = obj.metadata.namespace ?? 'default';
    if (obj.kind === 'ServiceMonitor') {
      const services = selected(
        obj.spec.selector,
        docs.filter((d) => d.obj.kind === 'Service'),
        (s) => s.obj.metadata?.labels,
        where,
        problems,
      );
      if (services.length === 0) problems.push(`${where}: its selector matches no Service's labels in deploy/kubernetes`);
      for (const service of services) {
        const backends = podsOf(service.obj.spec.selector ?? {}).filter((w) => dirname(w.file) === dirname(service.file));
        for (const [i, ep] of (obj.spec.endpoints ?? []).entries()) {
          const at = `${where} endpoint ${i} -> Service/${service.obj.metadata.name}`;
          if ((ep.path ?? '/metrics') !== '/metrics') problems.push(`${at}: path ${ep.path}, not /metrics`);
          if (typeof ep.port !== 'string') problems.push(`${at}: no port name (the Service's port is named)`);
          const sport = (service.obj.spec.ports ?? []).find((p: any) => p.name === ep.port);
          if (!sport) {
            problems.push(
              `${at}: port ${ep.port} is no port name of the Service (it has ${(service.obj.spec.ports ?? []).map((p: any) => p.name).join(', ')})`,
            );
            continue;
          }
          // The Service port leads to the gateway's own port: the one its probes ask, so server.port.
          const target = sport.targetPort ?? sport.port;
          const gateways = backends
            .flatMap(gatewayContainers)
            .filter(({ c }) =>
              (c.ports ?? []).some((p: any) => (typeof target === 'string' ? p.name === target : p.containerPort === target)),
            );
          if (gateways.length === 0) problems.push(`${at}: the Service's port ${ep.port} leads to no gateway container's port`);
          for (const { c } of gateways) {
            if (c.readinessProbe?.httpGet?.port !== target)
              problems.push(
                `${at}: port ${ep.port} is ${target}, and the gateway ${c.name} answers its probes on ${c.readinessProbe?.httpGet?.port}`,
              );
            problems.push(...scrapeKeyProblems(ep, c, find, at));
          }
          const base =
            obj.spec.jobLabel && service.obj.metadata.labels?.[obj.spec.jobLabel]
              ? service.obj.metadata.labels[obj.spec.jobLabel]
              : service.obj.metadata.name;
          const labels: Record<string, string> = {
            job: base,
            __meta_kubernetes_service_name: service.obj.metadata.name,
            __meta_kubernetes_namespace: namespace,
          };
          for (const [k, v] of Object.entries<string>(service.obj.metadata.labels ?? {}))
            labels[`__meta_kubernetes_service_label_${k.replace(/[^a-zA-Z0-9_]/g, '_')}`] = v;
          const out = relabel(labels, (ep.relabelings ?? []).map(fromOperator));
          jobs.push({ where: at, job: out?.job });
        }
      }
    } else {
      const pods = selected(obj.spec.selector, workloads, (w) => w.obj.spec.template.metadata?.labels, where, problems);
      if (pods.length === 0) problems.push(`${where}: its selector matches no workload's pod labels in deploy/kubernetes`);
      for (const w of pods) {
        const pod = w.obj.spec.template.spec;
        const all = [
          ...(pod.initContainers ?? []).map((c: any) => ({ c, init: true })),
          ...(pod.containers ?? []).map((c: any) => ({ c, init: false })),
        ];
        for (const [i, ep] of (obj.spec.podMetricsEndpoints ?? []).entries()) {
          const at = `${where} endpoint ${i} -> ${w.obj.kind}/${w.obj.metadata.name}`;
          if ((ep.path ?? '/metrics') !== '/metrics') problems.push(`${at}: path ${ep.path}, not /metrics`);
          const owners = all.filter(({ c }) => (c.ports ?? []).some((p: any) => p.name === ep.port));
          if (owners.length !== 1 || !isGatewayImage(owners[0].c.image)) {
            problems.push(
              `${at}: port ${ep.port} is ${owners.length === 0 ? 'no container port name of the pod' : `named by ${owners.map(({ c }) => c.name).join(' and ')}, not by the gateway container alone`}`,
            );
            continue;
          }
          const { c, init } = owners[0];
          if (c.readinessProbe?.httpGet?.port !== ep.port)
            problems.push(`${at}: port ${ep.port}, and the gateway ${c.name} answers its probes on ${c.readinessProbe?.httpGet?.port}`);
          problems.push(...scrapeKeyProblems(ep, c, find, at));
          const template = w.obj.spec.template;
          const base =
            obj.spec.jobLabel && template.metadata?.labels?.[obj.spec.jobLabel]
              ? template.metadata.labels[obj.spec.jobLabel]
              : `${namespace}/${obj.metadata.name}`;
          const port = (c.ports ?? []).find((p: any) => p.name === ep.port);
          const labels = podTargetLabels(template, {
            job: base,
            namespace,
            podName: `${w.obj.metadata.name}-0`,
            podIp: '10.0.0.1',
            container: c,
            port,
            init,
          });
          const out = relabel(labels, (ep.relabelings ?? []).map(fromOperator));
          if (!out) problems.push(`${at}: its relabelings drop the gateway's target`);
          jobs.push({ where: at, job: out?.job });
        }
      }
    }
  }
  if (monitors.length === 0) problems.push('no ServiceMonitor or PodMonitor in deploy/kubernetes');
  return { problems, jobs };
}

// --- alerts --------------------------------------------------------------------------------

/**
 * The selector CompactionGatewayDown picks the gateway's targets by, `{job="compaction-gateway"}`:
 * the same in its `up` and its absent(), which must be there (`up == 0` alone never sees a
 * gateway that no target stands for). alerts.yaml's header says how to change it.
 */
function downSelector(alerts: any): { text: string; matchers: Matcher[]; problems: string[] } {
  const rules = (alerts?.groups ?? []).flatMap((g: any) => g.rules ?? []);
  const rule = rules.find((r: any) => r.alert === 'CompactionGatewayDown');
  if (!rule) return { text: '{}', matchers: [], problems: ['alerts.yaml has no CompactionGatewayDown'] };
  const problems: string[] = [];
  if (!/\babsent\s*\(\s*up\s*\{/.test(rule.expr))
    problems.push(`CompactionGatewayDown has no absent(up{...}): with no gateway target at all it never fires: ${rule.expr}`);
  const texts = [
    ...new Set(
      selectors(rule.expr)
        .filter((s) => s.name === 'up')
        .map((s) => s.matchers.replace(/\s+/g, '')),
    ),
  ];
  if (texts.length !== 1)
    problems.push(
      `CompactionGatewayDown selects up by ${texts.map((t) => `{${t}}`).join(' and ') || 'nothing'}: one selector, written the same in both places`,
    );
  let matchers: Matcher[] = [];
  try {
    matchers = parseMatchers(texts[0] ?? '');
  } catch (err) {
    problems.push(`CompactionGatewayDown: ${(err as Error).message}`);
  }
  if (texts.length === 1 && matchers.length === 0)
    problems.push('CompactionGatewayDown selects up by no label: every target Prometheus scrapes, its own too');
  return { text: `{${texts[0]}}`, matchers, problems };
}

// --- alerts and metrics --------------------------------------------------------------------

const SCRAPE_KUBERNETES_PODS = join(DEPLOY, 'prometheus', 'scrape-kubernetes-pods.yaml');

/**
 * CompactionGatewayDown has one selector, in its `up` and its absent(), and it matches the job
 * that compose's prometheus.yml, the annotation scrape job (scrape-kubernetes-pods.yaml, its
 * relabel rules applied here to the pods) and the monitors give the gateway.
 */
export function downSelectorProblems(alerts: unknown, composePrometheus: any, pods: any, docs: K8sDoc[]): string[] {
  const down = downSelector(alerts);
  const problems: string[] = [...down.problems];
  const judge = (where: string, labels: Record<string, string> | undefined) => {
    if (!labels) return problems.push(`${where}: the gateway's target is dropped`);
    if (!matches(down.matchers, labels))
      problems.push(
        `${where}: the gateway's target gets job="${labels.job}", which ${down.text} does not match (alerts.yaml's header says how to change one or the other)`,
      );
  };

  // Compose: the job that scrapes gateway:PORT, relabeled as Prometheus would.
  for (const s of composePrometheus.scrape_configs ?? []) {
    for (const c of s.static_configs ?? []) {
      for (const t of (c.targets ?? []).filter((t: string) => t.startsWith('gateway:'))) {
        judge(
          `compose job ${s.job_name}`,
          relabel(
            { job: s.job_name, __address__: t, __metrics_path__: s.metrics_path ?? '/metrics', ...(c.labels ?? {}) },
            s.relabel_configs ?? [],
          ),
        );
      }
    }
  }

  // Annotation-based scraping: its rules go over each gateway pod of the manifests.
  const job = (pods.scrape_configs ?? []).find((s: any) => s.kubernetes_sd_configs?.some((k: any) => k.role === 'pod'));
  if (!job) problems.push(`${relative(ROOT, SCRAPE_KUBERNETES_PODS)}: no scrape job with kubernetes_sd_configs role pod`);
  for (const w of job ? docs.filter(isWorkload) : []) {
    const template = w.obj.spec.template;
    for (const { c, init } of gatewayContainers(w)) {
      const where = `${relative(ROOT, w.file)} ${w.obj.kind}/${w.obj.metadata.name} container ${c.name} through ${relative(ROOT, SCRAPE_KUBERNETES_PODS)}`;
      const port = (c.ports ?? []).find(
        (p: any) => p.name === c.readinessProbe?.httpGet?.port || p.containerPort === c.readinessProbe?.httpGet?.port,
      );
      if (!port) {
        problems.push(`${where}: no container port for its probes`);
        continue;
      }
      const labels = relabel(
        podTargetLabels(template, {
          job: job.job_name,
          namespace: 'default',
          podName: `${w.obj.metadata.name}-0`,
          podIp: '10.0.0.1',
          container: c,
          port,
          init,
        }),
        job.relabel_configs ?? [],
      );
      if (labels && labels.__address__ !== `10.0.0.1:${port.containerPort}`)
        problems.push(`${where}: scrapes ${labels.__address__}, not the gateway's port ${port.containerPort} (prometheus.io/port)`);
      if (labels && labels.__metrics_path__ !== '/metrics')
        problems.push(`${where}: scrapes ${labels.__metrics_path__}, not /metrics (prometheus.io/path)`);
      if ((c.env ?? []).some((e: any) => e.name === 'GATEWAY_METRICS_KEY') && !job.authorization)
        problems.push(
          `${where}: the gateway asks for GATEWAY_METRICS_KEY, and the scrape job sends no authorization: every scrape is refused`,
        );
      judge(where.replace(/ through .*$/, ' (annotations)'), labels);
    }
  }

  // The Prometheus Operator's monitors.
  for (const { where, job } of monitorsProblems(docs).jobs) judge(where, job === undefined ? undefined : { job });
  return problems;
}
/**
 * Every metric the alerts and the dashboard use is one the gateway exposes (`metricsText`, its
 * /metrics), with a histogram read through its _bucket, _sum or _count.
 */
export function metricsProblems(metricsText: string, alerts: any, dashboard: unknown): string[] {
  const types = new Map<string, string>();
  for (const m of metricsText.matchAll(/^# TYPE (\S+) (\S+)$/gm)) types.set(m[1], m[2]);
  const histograms = new Set([...types].filter(([, t]) => t === 'histogram').map(([n]) => n));
  const exposed = new Set([...types.keys(), 'up']);
  const uses: Array<[where: string, expr: string]> = [];
  for (const group of alerts?.groups ?? []) {
    for (const rule of group.rules ?? []) uses.push([`alert ${rule.alert ?? rule.record}`, rule.expr]);
  }
  for (const q of dashboardQueries(dashboard).queries) uses.push([`dashboard ${q.where}`, q.expr]);
  const problems: string[] = [];
  const used = new Set<string>();
  for (const [where, expr] of uses) {
    const names = metricNames(expr);
    if (names.length === 0) problems.push(`${where}: uses no gateway metric: ${expr}`);
    for (const name of names) {
      const base = baseMetricName(name, histograms);
      used.add(base);
      if (!exposed.has(base)) problems.push(`${where}: ${name} is not a metric the gateway exposes`);
      if (base !== name && !histograms.has(base)) problems.push(`${where}: ${name}: ${base} is not a histogram`);
      if (histograms.has(name)) problems.push(`${where}: ${name} is a histogram: use ${name}_bucket, _sum or _count`);
    }
  }
  return problems;
}
