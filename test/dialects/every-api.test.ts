import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { APIS, DIALECTS, apiOfPath } from '../../src/dialects/index.js';
import { ERRORS } from '../../src/http/errors.js';
import { total } from '../helpers/exposition.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import type { ApiFixture } from '../scenarios/apis/fixture.js';

/*
 * A new API is one dialect and one row of the scenario table (CONTRIBUTING, "Adding an API"):
 * every API in the one list has its dialect, with every fact of its descriptor, a route of the
 * gateway that answers it, its own shape of the gateway's errors, its pass-through where its
 * provider serves it, and a row in test/scenarios/rescue.test.ts.
 */

const TABLE_URL = new URL('../scenarios/rescue.test.ts', import.meta.url);

/** The scenario table's rows: each fixture its FIXTURES list names, loaded from the module the table imports it from. */
async function scenarioRows(): Promise<ApiFixture[]> {
  const table = readFileSync(TABLE_URL, 'utf8');
  const list = /const FIXTURES: ApiFixture\[\] = \[([^\]]*)\]/.exec(table);
  if (!list) throw new Error('test/scenarios/rescue.test.ts has no FIXTURES list');
  const names = list[1]
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  return Promise.all(
    names.map(async (name) => {
      const from = new RegExp(`import \\{[^}]*\\b${name}\\b[^}]*\\} from '([^']+)'`).exec(table);
      if (!from) throw new Error(`the scenario table lists ${name} but imports it from nowhere`);
      const module = (await import(new URL(from[1].replace(/\.js$/, '.ts'), TABLE_URL).href)) as Record<string, ApiFixture>;
      return module[name];
    }),
  );
}

let standIn: StandIn | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await standIn?.close();
  gateway = standIn = undefined;
});

describe('every API in the list', () => {
  it('is the list the config, the metrics and the dialects all read', () => {
    expect(Object.keys(DIALECTS).sort()).toEqual([...APIS].sort());
  });

  it.each(APIS)('%s has a dialect that names it, with endpoints of its own paths', (api) => {
    const dialect = DIALECTS[api];
    expect(dialect.api).toBe(api);
    expect(dialect.endpoints.length).toBeGreaterThan(0);
    for (const endpoint of dialect.endpoints) {
      // The route's own path, a model parameter written as a model would be.
      const path = endpoint.path.replace(/:model\([^)]*\):/, 'some-model');
      expect(path.startsWith(`${dialect.prefix}/`)).toBe(true);
      expect(apiOfPath(path)).toBe(api);
    }
  });

  it.each(APIS)('%s states every fact the rest of the gateway reads off its descriptor', (api) => {
    const d = DIALECTS[api];
    expect(typeof d.title).toBe('string');
    expect(typeof d.upstreamBaseHoldsPrefix).toBe('boolean');
    expect(typeof d.clientBaseUrl.name).toBe('string');
    expect(typeof d.clientBaseUrl.withPrefix).toBe('boolean');
    // A client given the prefix in its base URL may lose it: the 404 says to add it back.
    expect(d.missingPrefix === null ? !d.clientBaseUrl.withPrefix : d.missingPrefix instanceof RegExp).toBe(true);
    expect(Array.isArray(d.agentCompactions)).toBe(true);
    for (const agent of d.agentCompactions) {
      expect(agent.agent).toMatch(/\w/);
      expect(agent.is({}, null)).toBe(false);
    }
    expect(d.modelWindow === null || (d.modelWindow.path('m').startsWith('/') && d.modelWindow.from.length > 0)).toBe(true);
    expect(typeof d.telemetry.operation).toBe('string');
    expect(typeof d.telemetry.provider).toBe('string');
    // One prefix goes upstream one way; one name on the ready line is one base URL.
    for (const other of APIS.map((a) => DIALECTS[a])) {
      if (other.prefix === d.prefix) expect(other.upstreamBaseHoldsPrefix).toBe(d.upstreamBaseHoldsPrefix);
      if (other.clientBaseUrl.name === d.clientBaseUrl.name) {
        expect([other.prefix, other.clientBaseUrl.withPrefix]).toEqual([d.prefix, d.clientBaseUrl.withPrefix]);
      }
    }
  });

  it.each(APIS)('%s has a row in the scenario table', async (api) => {
    const rows = await scenarioRows();
    expect(rows.filter((row) => row.api === api)).toHaveLength(1);
  });

  it.each(APIS)(
    "%s: a request through the gateway is answered by the provider, and the gateway answers its own errors in the API's shape",
    async (api) => {
      const [row] = (await scenarioRows()).filter((r) => r.api === api);
      standIn = await startStandIn();
      const limit = 32 * 1024;
      gateway = await startGateway({ upstream: { url: row.upstreamUrl(standIn) }, server: { bodyLimitBytes: limit } });

      const answered = await row.post(gateway.origin, JSON.stringify(row.wire(row.request(2), false)), { stream: false });
      expect(answered.status).toBe(200);
      await answered.arrayBuffer();
      expect(standIn.calls(api)).toHaveLength(1);
      // Through the API's rescued route, not the pass-through that serves its other paths.
      const route = DIALECTS[api].endpoints[0].label ?? DIALECTS[api].endpoints[0].path;
      const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
      expect(total(metrics, 'gateway_http_requests_total', { route, status_class: '2xx' })).toBe(1);

      const tooLarge = JSON.stringify(row.wire(row.request(2 + limit / 4_000), false));
      expect(tooLarge.length).toBeGreaterThan(limit);
      const refused = await row.post(gateway.origin, tooLarge, { stream: false });
      expect(refused.status).toBe(413);
      const body = await refused.json();
      const { status, type, message } = ERRORS.request_too_large;
      expect(body).toEqual(DIALECTS[api].errorBody({ status, type, code: 'request_too_large', message, param: null }));
      // The gateway's code is in it, wherever the API's clients read it.
      expect(JSON.stringify(body)).toMatch(/request_too_large/i);
      expect(standIn.calls(api)).toHaveLength(1);

      // Another path of the API's prefix arrives where its provider serves it, under the row's base URL.
      const { prefix, missingPrefix } = DIALECTS[api];
      const listed = await fetch(`${gateway.origin}${prefix}/models`);
      await listed.arrayBuffer();
      expect(standIn.received.map((r) => r.url)).toContain(`${prefix}/models`);

      // The rescued path without the prefix: a 404 that says to add it, where the API's clients can lose it.
      const bare = DIALECTS[api].endpoints[0].path.slice(prefix.length);
      const lost = await fetch(`${gateway.origin}${bare}`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
      expect(lost.status).toBe(404);
      const said = JSON.stringify(await lost.json());
      if (missingPrefix) expect(said).toContain(`add ${prefix} to the client's base URL`);
    },
  );
});
