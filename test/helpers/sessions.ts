import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

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

/** A Codex request with a reasoning item (encrypted, opaque) before each of its function calls. */
export function withReasoning(body: Record<string, any>): Record<string, any> {
  const input: unknown[] = [];
  for (const item of body.input as Array<Record<string, unknown>>) {
    if (item.type === 'function_call') {
      input.push({ type: 'reasoning', id: `rs_${String(item.call_id)}`, summary: [], encrypted_content: `gAAAAB${Buffer.from(String(item.call_id)).toString('base64')}==opaque` });
    }
    input.push(item);
  }
  return { ...body, input };
}
