// npm run try:agents: runs the real agent CLIs, each configured with its snippet from
// deploy/agents/, against a gateway on loopback whose upstream is the strict stand-in provider
// (startStandIn, test/helpers/provider.ts: each API's documented rules, with its exact errors), and
// checks that each CLI exits 0, that its request came through the gateway to the provider on its
// API's path with its key, and that the stand-in's answer shows in its output.
//
// Not part of CI: it installs the CLIs from the npm registry into a temporary folder (about
// 1 GB with Codex's and Claude Code's binaries). Run it by hand after changing a snippet, or to
// check newer agent versions: `npm run try:agents -- codex@0.171.0 pi@0.73.1`. Aider and the
// Python SDK come from PyPI, which this project's machines do not reach, so they are not here.
//
// Everything listens on 127.0.0.1; the agents' own background traffic (telemetry, update checks)
// is turned off where they have a switch for it.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiOf, startStandIn } from '../test/helpers/provider.js';
import { ROOT, run, startGateway, write } from './agent-harness.js';

const AGENTS = join(ROOT, 'deploy', 'agents');
const INSTALL_MS = 10 * 60_000;
const RUN_MS = 120_000;
const ANSWER = 'hello from the stand-in provider';

interface AgentCli {
  pkg: string;
  /** The version last checked. */
  version: string;
  bin: string;
  /** The environment variable that carries its key. */
  key: string;
  /** The header it sends the key in; `authorization: Bearer` when unset. */
  header?: string;
  /** The API path its requests must reach the provider on. */
  path: string;
  setup: (home: string, gatewayOrigin: string, cwd: string) => void;
  env: (home: string) => Record<string, string>;
  args: string[];
}

type AgentName = 'codex' | 'claude' | 'opencode' | 'pi' | 'qwen';

const ALL: Record<AgentName, AgentCli> = {
  codex: {
    pkg: '@openai/codex',
    version: '0.171.0',
    bin: 'codex',
    key: 'OPENAI_API_KEY',
    path: '/v1/responses',
    setup: (home, gw) => write(join(home, 'codex', 'config.toml'), snippet('codex/config.toml', gw)),
    env: (home) => ({ CODEX_HOME: join(home, 'codex') }),
    args: ['exec', '--skip-git-repo-check', '-s', 'read-only', 'say hi'],
  },
  claude: {
    pkg: '@anthropic-ai/claude-code',
    version: '2.1.332',
    bin: 'claude',
    key: 'ANTHROPIC_API_KEY',
    header: 'x-api-key',
    path: '/v1/messages',
    setup: (home, gw) => write(join(home, '.claude', 'settings.json'), snippet('claude-code/settings.json', gw)),
    env: () => ({
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
    }),
    args: ['-p', 'say hi'],
  },
  opencode: {
    pkg: 'opencode-ai',
    version: '1.18.33',
    bin: 'opencode',
    key: 'OPENAI_API_KEY',
    path: '/v1/chat/completions',
    setup: (_home, gw, cwd) => write(join(cwd, 'opencode.json'), snippet('opencode/opencode.json', gw)),
    env: (home) => ({
      XDG_CONFIG_HOME: join(home, '.config'),
      XDG_CACHE_HOME: join(home, '.cache'),
      XDG_DATA_HOME: join(home, '.local', 'share'),
      OPENCODE_DISABLE_MODELS_FETCH: '1',
      OPENCODE_DISABLE_AUTOUPDATE: '1',
      OPENCODE_DISABLE_SHARE: '1',
    }),
    args: ['run', 'say hi'],
  },
  pi: {
    pkg: '@mariozechner/pi-coding-agent',
    version: '0.73.1',
    bin: 'pi',
    key: 'OPENAI_API_KEY',
    path: '/v1/chat/completions',
    setup: (home, gw) => write(join(home, '.pi', 'agent', 'models.json'), snippet('pi/models.json', gw)),
    env: () => ({}),
    args: ['-p', '--model', 'gateway/gpt-4.1', 'say hi'],
  },
  qwen: {
    pkg: '@qwen-code/qwen-code',
    version: '0.24.4',
    bin: 'qwen',
    key: 'OPENAI_API_KEY',
    path: '/v1/chat/completions',
    setup: (home, gw, cwd) => {
      write(join(cwd, '.qwen', '.env'), snippet('qwen-code/.env', gw));
      write(
        join(home, '.qwen', 'settings.json'),
        JSON.stringify({ privacy: { usageStatisticsEnabled: false }, telemetry: { enabled: false } }),
      );
    },
    env: () => ({}),
    args: ['say hi'],
  },
};

const isAgentName = (name: string): name is AgentName => Object.hasOwn(ALL, name);

const pathOf = (url: string) => url.split('?')[0];

function snippet(file: string, gatewayOrigin: string): string {
  return readFileSync(join(AGENTS, file), 'utf8').replaceAll('http://127.0.0.1:8080', gatewayOrigin);
}

// Arguments: agent names, optionally name@version; none means all, at the pinned versions.
const wanted = process.argv.slice(2).map((a): [string, string | undefined] => [a.split('@')[0], a.split('@')[1]]);
const agents: Array<[AgentName, string | undefined]> = [];
for (const [name, version] of wanted.length > 0 ? wanted : Object.keys(ALL).map((n): [string, undefined] => [n, undefined])) {
  if (!isAgentName(name)) {
    console.error(`unknown agent ${name}; known: ${Object.keys(ALL).join(', ')}`);
    process.exit(2);
  }
  agents.push([name, version]);
}

const work = mkdtempSync(join(tmpdir(), 'try-agents-'));
const provider = await startStandIn({ reply: () => ({ text: ANSWER }) });
const gateway = await startGateway(provider.origin);
let failed = 0;
try {
  for (const [name, versionArg] of agents) {
    const a = ALL[name];
    const version = versionArg ?? a.version;
    const dir = join(work, name);
    const home = join(dir, 'home');
    const cwd = join(dir, 'project');
    mkdirSync(home, { recursive: true });
    mkdirSync(cwd, { recursive: true });
    writeFileSync(join(dir, 'package.json'), '{"private":true}');
    const install = await run(
      'npm',
      ['install', '--no-audit', '--no-fund', '--loglevel=error', `${a.pkg}@${version}`],
      { cwd: dir, env: process.env },
      INSTALL_MS,
    );
    if (install.code !== 0) {
      failed++;
      console.log(`FAIL ${name}: npm install ${a.pkg}@${version}: ${install.out.slice(-500)}`);
      continue;
    }
    a.setup(home, gateway.origin, cwd);
    const key = `sk-try-${name}-${Math.random().toString(36).slice(2, 10)}`;
    const seen = provider.received.length;
    const env = { PATH: process.env.PATH, HOME: home, LANG: 'C.UTF-8', [a.key]: key, ...a.env(home) };
    const result = await run(join(dir, 'node_modules', '.bin', a.bin), a.args, { cwd, env }, RUN_MS);
    const since = provider.received.slice(seen);
    const mine = provider.calls(apiOf(a.path)!).filter((r) => since.includes(r) && pathOf(r.url) === a.path);
    // What the stand-in refused (a strict rule's exact error, or a route it does not have), to judge by hand.
    const refused = since
      .filter((r) => (provider.answerStatus(r) ?? 0) >= 400)
      .map((r) => `${r.method} ${pathOf(r.url)} ${provider.answerStatus(r)}: ${provider.answerBytes(r).toString('utf8').slice(0, 300)}`);
    const sentKey = mine.some((r) => (a.header ? r.headers[a.header] === key : r.headers.authorization === `Bearer ${key}`));
    const answered = result.out.includes(ANSWER);
    if (result.code === 0 && mine.length > 0 && sentKey && answered) {
      console.log(
        `ok   ${name} ${a.pkg}@${version}: ${mine.length} request(s) to ${a.path} through the gateway, key from ${a.key}, answer shown${refused.map((v) => `\n  refused: ${v}`).join('')}`,
      );
    } else {
      failed++;
      console.log(
        `FAIL ${name} ${a.pkg}@${version}: exit ${result.code}, ${mine.length} request(s) to ${a.path}, key ${sentKey ? 'sent' : 'not sent'}, answer ${answered ? 'shown' : 'not shown'}${refused.map((v) => `\n  refused: ${v}`).join('')}\n${result.out.slice(-1500)}`,
      );
    }
  }
} finally {
  await gateway.stop();
  await provider.close();
  rmSync(work, { recursive: true, force: true });
}
console.log(
  failed === 0
    ? `try:agents: all ${agents.length} agents went through the gateway`
    : `try:agents: ${failed} of ${agents.length} agents FAILED`,
);
process.exit(failed === 0 ? 0 : 1);
