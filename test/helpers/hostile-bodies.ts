/*
 * Chat bodies of the sizes an adversary (or a long agent session) sends: built straight into one
 * buffer, as a client would have them on the wire (bench/hostile-load.ts sends them too).
 */

/** An agent-like conversation of about `targetBytes`: a system prompt, a task, then tool rounds with big outputs. */
export function agentConversationBody(targetBytes: number, messages: number, seed: number): Buffer {
  const rounds = Math.max(1, Math.floor((messages - 2) / 2));
  const outputBytes = Math.max(16, Math.floor(targetBytes / rounds) - 200);
  const line = `src/module-${seed}.ts:42: error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.\n`;
  const output = line.repeat(Math.ceil(outputBytes / line.length)).slice(0, outputBytes);
  const items: unknown[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: `Fix the build of project ${seed}.` },
  ];
  for (let i = 0; i < rounds; i++) {
    const id = `call_${seed}_${i}`;
    items.push({
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name: 'bash', arguments: JSON.stringify({ command: `npm test -- ${i}` }) } }],
    });
    items.push({ role: 'tool', tool_call_id: id, content: `${i}: ${output}` });
  }
  items.push({ role: 'user', content: 'Go on.' });
  return Buffer.from(JSON.stringify({ model: 'gpt-test', messages: items }));
}

/** Alternating one-line turns, as many as asked: the most items per byte (1M of them are about 44 MB). */
export function tinyTurnsBody(messages: number, seed: number): Buffer {
  const items: unknown[] = [{ role: 'system', content: 'You are a coding agent.' }];
  for (let i = 0; i < messages; i++) items.push({ role: i % 2 === 0 ? 'user' : 'assistant', content: `turn ${seed}.${i}` });
  if (messages % 2 === 0) items.push({ role: 'user', content: 'Go on.' });
  return Buffer.from(JSON.stringify({ model: 'gpt-test', messages: items }));
}

/** A short conversation whose `metadata` is one object of `keys` keys (3M of them are about 38 MB): the most keys per byte. */
export function wideObjectBody(keys: number, seed: number): Buffer {
  const parts = [`{"model":"m${seed}","metadata":{`];
  for (let i = 0; i < keys; i++) parts.push(`${i ? ',' : ''}"k${i}":0`);
  parts.push('},"messages":[{"role":"user","content":"go"}]}');
  return Buffer.from(parts.join(''));
}

/** One message whose content is a list of `strings` short strings (8M of them are about 40 MB): the most strings per byte. */
export function manyStringsBody(strings: number, seed: number): Buffer {
  const parts = [`{"model":"m${seed}","messages":[{"role":"user","content":[`];
  for (let i = 0; i < strings; i++) parts.push(`${i ? ',' : ''}"${(i % 1296).toString(36)}"`);
  parts.push(']}]}');
  return Buffer.from(parts.join(''));
}
