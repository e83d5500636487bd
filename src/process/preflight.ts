import { ConfigError, configSource, loadConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { openGatewayRefusal, startupFields, startupWarnings } from './startup.js';
import { createEgress } from '../upstream/client.js';
import { proxyVariableProblem } from '../upstream/egress.js';
import { resolveUpstreams } from '../upstream/upstreams.js';

type Env = Record<string, string | undefined>;

/** A config the gateway can start with and the file it came from, or every reason it cannot: one line each. */
export type Preflight = { config: Readonly<Config>; source: string | undefined } | { problems: string[] };

/** Serving and `--check` both rest on this, so a config that passes `--check` is one the gateway starts with. */
export function preflight(argv: readonly string[], env: Env, shipped: string): Preflight {
  let config: Readonly<Config>;
  try {
    config = loadConfig(argv, env, shipped);
  } catch (err) {
    if (err instanceof ConfigError) return { problems: err.problems.map((p) => `invalid configuration: ${p}`) };
    throw err;
  }
  const problems = proxyProblems(config, env).map((p) => `invalid configuration: ${p}`);
  const refusal = openGatewayRefusal(config);
  if (refusal) problems.push(refusal);
  return problems.length > 0 ? { problems } : { config, source: configSource(argv, env, shipped) };
}

/** Each proxy variable whose value is not a URL, said once, naming the first origin that would take it. */
function proxyProblems(config: Readonly<Config>, env: Env): string[] {
  const upstreams = resolveUpstreams(config);
  const origins = new Map<string, string | undefined>();
  for (const u of upstreams.all) if (!origins.has(u.target.origin)) origins.set(u.target.origin, u.proxy);
  // A summarizer URL of its own goes with the shared settings (upstream/client.ts createEgress).
  for (const url of [config.summarizer.url, ...upstreams.all.map((u) => u.summarizer.url)]) {
    if (url && !origins.has(new URL(url).origin)) origins.set(new URL(url).origin, config.upstream.proxy);
  }
  const byVariable = new Map<string, string>();
  for (const [origin, proxy] of origins) {
    const problem = proxyVariableProblem(origin, proxy, env);
    const variable = problem?.slice(0, problem.indexOf(':'));
    if (problem && variable && !byVariable.has(variable)) byVariable.set(variable, problem);
  }
  return [...byVariable.values()];
}

/**
 * Every upstream resolved as serving would (pool built, CA file and proxy included, closed without a connection), and the ready
 * line's warnings.
 */
export async function checkReport(
  config: Readonly<Config>,
  source: string | undefined,
  env: Env,
  versions: { gateway: string; node: string },
): Promise<string[]> {
  const upstreams = resolveUpstreams(config);
  await createEgress(config, upstreams, env).close();
  const fields = startupFields(config, source, versions, env);
  const { host, port } = config.server;
  return [
    `configuration valid: ${fields.config}; would listen on ${host}:${port}; default upstream ${fields.defaultUpstream}; auth ${fields.auth}; compaction ${fields.compaction}; memory ${fields.memory}`,
    ...fields.upstreams.map((u) => `upstream ${u.name}: ${u.url} (${u.apis}); key ${u.key}; proxy ${u.proxy}; summarizer ${u.summarizer}`),
    ...(fields.routes ?? []).map((r) => `route ${r}`),
    ...startupWarnings(config).map((w) => `warning: ${w}`),
  ];
}
