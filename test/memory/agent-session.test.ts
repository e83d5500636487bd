import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type Api, type StandIn } from '../helpers/provider.js';
import type { ApiFixture, Turn } from '../scenarios/apis/fixture.js';
import { messagesFixture } from '../scenarios/apis/messages.js';
import { responsesFixture } from '../scenarios/apis/responses.js';

/*
 * Memory follows an agent's own session id where it sends one (src/memory/fingerprint.ts
 * agentSessionOf): Claude Code's x-claude-code-session-id, Codex's x-codex-window-id. Two sessions
 * of one project share their prefix but not what was remembered; a Codex window that moves on
 * starts afresh. (That the prefix does not enter the key is memory/fingerprint's unit test.)
 */

const TURNS = 10;
const said = (n: number) => `Let me read src/next${n}.ts.`;
const reply = (_api: Api, n: number) => ({
  text: said(n),
  call: { id: `read_next_${n}`, name: 'read_file', args: { path: `src/next${n}.ts` } },
});

let standIn: StandIn | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await standIn?.close();
  gateway = standIn = undefined;
});

async function start(f: ApiFixture, limitBytes: number): Promise<string> {
  standIn = await startStandIn({ limitBytes, tooLong: 'stated', reply });
  gateway = await startGateway({ upstream: { url: f.upstreamUrl(standIn) } });
  return gateway.origin;
}

/** A turn's header, as the test reads it. */
const trigger = (turn: Turn) => turn.header?.trigger;

const CASES: Array<[string, ApiFixture, string, (id: string) => string]> = [
  ['Claude Code', messagesFixture, 'x-claude-code-session-id', (id) => id],
  ['Codex', responsesFixture, 'x-codex-window-id', (id) => `${id}:0`],
];

describe.each(CASES)('%s', (_name, f, header, idOf) => {
  const body = f.request(TURNS);
  const limitBytes = Math.floor(Buffer.byteLength(JSON.stringify(f.wire(body, false))) * 0.7);
  const as = (id: string) => ({ stream: false, headers: { [header]: idOf(id) } });

  it('a session remembers its compaction under its own id, and finds it on its next turn', async () => {
    const origin = await start(f, limitBytes);
    const first = await f.send(origin, body, as('session-a'));
    expect(first.header).toMatchObject({ outcome: 'replayed' });
    const later = await f.send(origin, f.next(body, first), as('session-a'));
    expect(later.status).toBe(200);
    expect(later.header).toMatchObject({ outcome: 'compacted', trigger: 'proactive', memory: 'hit' });
  });

  if (header === 'x-codex-window-id') {
    // (Codex's answers carry no bound state the next session's request would break: the same turn can go out as another session's.)
    it('another session of the same project, the same prefix and history, sees nothing of the first one', async () => {
      const origin = await start(f, limitBytes);
      const first = await f.send(origin, body, as('session-a'));
      const other = await f.send(origin, f.next(body, first), as('session-b'));
      expect(other.status).toBe(200);
      expect(trigger(other)).not.toBe('proactive');
      expect(other.header).toMatchObject({ outcome: 'replayed', memory: 'miss' });
    });

    it('a Codex window that moves on (Codex compacted the conversation itself) starts afresh', async () => {
      const origin = await start(f, limitBytes);
      const first = await f.send(origin, body, { stream: false, headers: { [header]: 'thread-1:0' } });
      expect(first.header).toMatchObject({ outcome: 'replayed' });
      const same = await f.send(origin, f.next(body, first), { stream: false, headers: { [header]: 'thread-1:0' } });
      expect(same.header).toMatchObject({ trigger: 'proactive', memory: 'hit' });
      const moved = await f.send(origin, f.next(body, first), { stream: false, headers: { [header]: 'thread-1:1' } });
      expect(trigger(moved)).not.toBe('proactive');
    });
  }
});
