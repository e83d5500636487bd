import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startStandIn } from './provider.js';

/** The request bodies of real agent sessions, as the agents sent them (test/fixtures/agent-sessions). */
const root = fileURLToPath(new URL('../fixtures/agent-sessions/', import.meta.url));

export function sessionBody(agent: 'codex' | 'pi' | 'opencode' | 'claude', file: string): Record<string, any> {
  return JSON.parse(readFileSync(`${root}${agent}/${file}`, 'utf8'));
}

/** The main-thread requests of a session, in order. */
export function sessionTurns(agent: 'codex' | 'pi' | 'opencode' | 'claude'): Record<string, any>[] {
  const out: Record<string, any>[] = [];
  for (let n = 1; n <= 14; n++) {
    try {
      out.push(sessionBody(agent, `${String(n).padStart(2, '0')}-main.json`));
    } catch {
      // opencode starts at 02 (its 01 is a title request); the others end at 13
    }
  }
  return out;
}

/**
 * A Codex request with a reasoning item before each of its function calls, as the Responses API
 * issues them: a strict stand-in answers the history before each call with that call, and the
 * reasoning item it puts before the call (encrypted, bound to that history, paired with the call
 * by its id) goes back with the recorded call, the call taking the id the stand-in gave it.
 */
export async function withReasoning(body: Record<string, any>): Promise<Record<string, any>> {
  let next: Record<string, any> = {};
  const standIn = await startStandIn({
    reply: () => ({ call: { id: String(next.call_id), name: String(next.name), args: JSON.parse(String(next.arguments)) } }),
  });
  try {
    const input: unknown[] = [];
    for (const item of body.input as Array<Record<string, any>>) {
      if (item.type !== 'function_call') {
        input.push(item);
        continue;
      }
      next = item;
      const res = await fetch(`${standIn.baseUrl}/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...body, stream: false, input }),
      });
      if (res.status !== 200) throw new Error(`the stand-in refused the history before ${item.call_id}: ${res.status} ${await res.text()}`);
      const { output } = (await res.json()) as { output: Array<Record<string, any>> };
      const reasoning = output.find((o) => o.type === 'reasoning');
      const call = output.find((o) => o.type === 'function_call');
      if (!reasoning || !call || call.call_id !== item.call_id)
        throw new Error(`the stand-in did not issue reasoning before ${item.call_id}`);
      input.push(reasoning, { ...item, id: call.id });
    }
    return { ...body, input };
  } finally {
    await standIn.close();
  }
}
