// deploy/compose's services fit together, as `docker-compose config` resolves them, alone and with
// the several-upstreams override; a planted fault of each kind is named.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { COMPOSE_SETUPS, composeConfig } from '../../scripts/deploy/compose.js';
import { DEPLOY, composeProblems } from './cross-checks.js';

const HAVE_COMPOSE = spawnSync('docker-compose', ['version', '--short'], { stdio: 'ignore' }).status === 0;
const IN_CI = Boolean(process.env.CI);
const alerts = () => parseYaml(readFileSync(`${DEPLOY}/prometheus/alerts.yaml`, 'utf8'));

if (!HAVE_COMPOSE && !IN_CI) {
  console.warn('test/deploy/compose.test.ts skipped: no docker-compose on PATH (apt-get install docker-compose; .ci/run installs it)');
}

describe.skipIf(!HAVE_COMPOSE && !IN_CI)('the compose setups', () => {
  const resolved = new Map<string, () => any>();
  for (const setup of COMPOSE_SETUPS) {
    let text: string | undefined;
    resolved.set(setup.label, () => {
      if (text === undefined) {
        const r = composeConfig(setup.files, setup.required);
        expect(r.status, r.out).toBe(0);
        text = r.out;
      }
      return parseYaml(text);
    });
  }

  it.each(COMPOSE_SETUPS.map((s) => s.label))('%s: the gateway config loads and every service fits', (label) => {
    expect(composeProblems(resolved.get(label)!(), alerts())).toEqual([]);
  });

  it('names a stop grace the drain outlasts, an unpublished port, an agent off the gateway and a missing mount', () => {
    const compose = resolved.get('compose')!();
    compose.services.gateway.stop_grace_period = '20s';
    compose.services.gateway.ports = [{ target: 9999, published: 9999 }];
    compose.services.agent.network_mode = 'bridge';
    // docker-compose 1.x prints a bind mount as "source:target[:mode]".
    compose.services.grafana.volumes = compose.services.grafana.volumes.map((v: string) => v.replace(/^([^:]+)/, '$1.missing'));
    expect(composeProblems(compose, alerts())).toEqual(
      expect.arrayContaining([
        'gateway: stop_grace_period 20s is not longer than server.shutdownGraceMs 30000',
        'gateway: publishes 9999, listens on 8080',
        'agent: network_mode is bridge, not service:gateway',
        expect.stringMatching(/^grafana: mounts deploy\/grafana\/.*\.missing, which does not exist$/),
      ]),
    );
  });

  it('names a variable the gateway does not read, and a Prometheus job CompactionGatewayDown does not select', () => {
    const compose = resolved.get('compose')!();
    compose.services.gateway.environment.GATEWAY_PORTT = '8080';
    const rules = alerts();
    const down = rules.groups.flatMap((g: any) => g.rules).find((r: any) => r.alert === 'CompactionGatewayDown');
    down.expr = down.expr.replaceAll('job="compaction-gateway"', 'job="somebody-else"');
    const problems = composeProblems(compose, rules);
    expect(problems.some((p) => p.startsWith('gateway config: environment variable GATEWAY_PORTT is neither one the gateway reads'))).toBe(
      true,
    );
    expect(problems).toContainEqual(
      expect.stringMatching(
        /^prometheus: scrape job \S+ gives the gateway job="compaction-gateway", which CompactionGatewayDown's \{job="somebody-else"\} does not select$/,
      ),
    );
  });
});
