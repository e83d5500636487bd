import type { Api } from '../../src/dialects/types.js';

/*
 * Coding-agent sessions made up from a seed: the same seed makes the same bytes, always (a small
 * PRNG of our own; nothing here reads Math.random or the clock). A session reads files, edits and
 * writes them, runs shell commands that fail with the errors agents meet (a TypeError, a TS2304,
 * a failing test file) and exit with a status, names functions and classes in its prose, and the
 * user adds constraints as it goes, each in the second sentence of a message, where a weak
 * summary drops it. Written as chat completions, Anthropic Messages or Responses requests.
 */

interface Call {
  id: string;
  name: string;
  args: Record<string, unknown>;
  result: string;
}

/** One step of a session: the assistant's turn with its tool results, or its answer and the user's next message. */
type Step = { kind: 'tools'; text?: string; calls: Call[] } | { kind: 'followup'; reply: string; user: string };

export interface Script {
  system: string;
  task: string;
  tools: ToolFamily;
  steps: Step[];
}

interface Rand {
  next(): number;
  int(n: number): number;
  pick<T>(list: readonly T[]): T;
  chance(p: number): boolean;
}

/** mulberry32. */
function seeded(seed: number): Rand {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: (list) => list[int(list.length)], chance: (p) => next() < p };
}

// ---------------------------------------------------------------------------------------------
// The project a session works on

const NOUNS = [
  'session',
  'invoice',
  'ledger',
  'webhook',
  'tenant',
  'payment',
  'schema',
  'upload',
  'search',
  'audit',
  'billing',
  'notifier',
  'quota',
  'catalog',
  'shipment',
  'refund',
  'token',
  'report',
];
const VERBS = [
  'load',
  'parse',
  'build',
  'resolve',
  'flush',
  'evict',
  'validate',
  'render',
  'schedule',
  'apply',
  'merge',
  'fetch',
  'encode',
  'sync',
];
const KINDS = ['Store', 'Manager', 'Client', 'Service', 'Registry', 'Builder', 'Policy', 'Handler', 'Worker', 'Cache'];
const DIRS = ['src', 'src/server', 'src/lib', 'src/core', 'src/jobs', 'packages/api/src'];
const SETTINGS = ['ttl_ms', 'max_retries', 'batch_size', 'timeout_ms', 'page_limit'];

interface Module {
  path: string;
  test: string;
  className: string;
  functions: [string, string];
  setting: string;
}

const cap = (s: string) => s[0].toUpperCase() + s.slice(1);
const thirdPerson = (verb: string) =>
  /(?:sh|ch|s)$/.test(verb) ? `${verb}es` : verb.endsWith('y') ? `${verb.slice(0, -1)}ies` : `${verb}s`;

function projectOf(r: Rand, size: number): Module[] {
  const nouns = [...NOUNS];
  const modules: Module[] = [];
  for (let i = 0; i < size; i++) {
    const noun = nouns.splice(r.int(nouns.length), 1)[0] ?? `part${i}`;
    const kind = r.pick(KINDS);
    const v1 = r.pick(VERBS);
    const v2 = r.pick(VERBS.filter((v) => v !== v1));
    const file = r.chance(0.5) ? `${noun}-${kind.toLowerCase()}` : `${noun}${kind}`;
    modules.push({
      path: `${r.pick(DIRS)}/${file}.ts`,
      test: `test/${noun}.test.ts`,
      className: `${cap(noun)}${kind}`,
      functions: [`${v1}${cap(noun)}`, `${v2}${cap(noun)}`],
      setting: `${noun}_${r.pick(SETTINGS)}`,
    });
  }
  return modules;
}

function sourceOf(r: Rand, m: Module, all: Module[]): string {
  const other = r.pick(all.filter((x) => x !== m));
  const lines = [
    `import { ${other.className} } from './${other.path.split('/').at(-1)!.replace(/\.ts$/, '')}';`,
    `import type { Clock, Logger } from '../runtime';`,
    '',
    `export const ${m.setting} = ${1 + r.int(90) * 100};`,
    '',
    `export class ${m.className} {`,
    `  private readonly entries = new Map<string, { value: unknown; expiresAt: number }>();`,
    '',
    `  constructor(private readonly clock: Clock, private readonly log: Logger, private readonly peer: ${other.className}) {}`,
    '',
  ];
  for (const fn of m.functions) {
    lines.push(`  ${fn}(id: string, options: { force?: boolean } = {}): unknown {`);
    for (let i = 0, n = 6 + r.int(18); i < n; i++) lines.push(`    ${filler(r, m)}`);
    lines.push('  }', '');
  }
  for (let i = 0, n = 10 + r.int(40); i < n; i++)
    lines.push(
      `  // ${r.pick(VERBS)} ${r.pick(NOUNS)} entries when the ${r.pick(NOUNS)} ${r.pick(KINDS).toLowerCase()} says so (${r.int(1000)})`,
    );
  lines.push('}');
  return lines.join('\n');
}

function filler(r: Rand, m: Module): string {
  const key = r.pick(NOUNS);
  return r.pick([
    `const ${key}Entry = this.entries.get(id);`,
    `if (!${key}Entry || ${key}Entry.expiresAt < this.clock.now()) return undefined;`,
    `this.log.debug({ id, ${key}: options.force }, '${m.functions[0]} ${key}');`,
    `this.entries.set(id, { value: options, expiresAt: this.clock.now() + ${m.setting} });`,
    `for (const [k, v] of this.entries) if (v.expiresAt < this.clock.now()) this.entries.delete(k);`,
    `await this.peer.flush?.(id);`,
  ]);
}

// ---------------------------------------------------------------------------------------------
// Tools, in the spellings agents use

interface ToolFamily {
  read: string;
  write: string;
  edit: string;
  shell: string;
  pathKey: string;
  oldKey: string;
  newKey: string;
}

const FAMILIES: ToolFamily[] = [
  { read: 'read_file', write: 'write_file', edit: 'edit_file', shell: 'bash', pathKey: 'path', oldKey: 'old_str', newKey: 'new_str' },
  { read: 'read_file', write: 'write_file', edit: 'str_replace', shell: 'bash', pathKey: 'path', oldKey: 'old_str', newKey: 'new_str' },
  { read: 'Read', write: 'Write', edit: 'Edit', shell: 'Bash', pathKey: 'file_path', oldKey: 'old_string', newKey: 'new_string' },
  { read: 'read', write: 'write', edit: 'edit', shell: 'bash', pathKey: 'filePath', oldKey: 'oldString', newKey: 'newString' },
];

const EXIT_STYLES = [(n: number) => `Exit code: ${n}`, (n: number) => `exit status ${n}`, (n: number) => `Process exited with code ${n}`];

const CONSTRAINTS = [
  () => "Don't touch package.json, the versions are pinned for the release.",
  () => 'Keep every new file under 100 lines.',
  () => 'Use pnpm, not npm, for every command.',
  (m: Module) => `Never change the public signature of ${m.functions[0]}.`,
  (m: Module) => `You must keep ${m.test} passing.`,
  (m: Module) => `Only edit files under ${m.path.split('/').slice(0, -1).join('/')}/.`,
  () => 'Always run pnpm lint before you say you are done.',
  (m: Module) => `Do not rename ${m.className}, two other services import it.`,
  (m: Module) => `Keep the ${m.setting} default as it is.`,
];
const OPENERS = ['Looks good so far.', 'Thanks.', 'OK, carry on.', 'Nice catch.', 'Hmm, that was close.', 'Good.'];
const REPLIES = ['That part is done.', 'The change is in.', 'Done with that step.', 'I have finished that part.'];

/** A session of `steps` steps. */
export function generateScript(seed: number, steps: number): Script {
  const r = seeded(seed);
  const modules = projectOf(r, 10 + r.int(6));
  const tools = r.pick(FAMILIES);
  const main = r.pick(modules);
  const ids = { n: 0 };
  const session: Session = {
    r,
    modules,
    tools,
    constraints: [...CONSTRAINTS],
    call: (name, args, result) => ({ id: `call_${seed}_${++ids.n}`, name, args, result }),
  };
  const out = Array.from({ length: steps }, (_, i) => stepOf(session, i));
  return {
    system: SYSTEM_PROMPT,
    task: `In the ${main.className} service, make ${main.functions[0]} honour ${main.setting}. Keep the diff small and explain what you changed.`,
    tools,
    steps: out,
  };
}

interface Session {
  r: Rand;
  modules: Module[];
  tools: ToolFamily;
  /** The constraints the user has not said yet. */
  constraints: ((m: Module) => string)[];
  call: (name: string, args: Record<string, unknown>, result: string) => Call;
}

/** About 4 steps in 10 read, 2 run the tests, 1 checks the types, 1.5 edit, and a user speaks up now and then. */
function stepOf({ r, modules, tools, constraints, call }: Session, i: number): Step {
  const m = r.pick(modules);
  const roll = r.next();
  if (i > 2 && roll < 0.1 && constraints.length > 0) {
    const constraint = constraints.splice(r.int(constraints.length), 1)[0](m);
    return {
      kind: 'followup',
      reply: `${r.pick(REPLIES)} ${m.className} now ${thirdPerson(r.pick(VERBS))} on demand.`,
      user: `${r.pick(OPENERS)} ${constraint}`,
    };
  }
  if (roll < 0.42) {
    const read = (x: Module) => call(tools.read, { [tools.pathKey]: x.path }, sourceOf(r, x, modules));
    const calls = r.chance(0.2) ? [read(m), read(r.pick(modules.filter((x) => x !== m)))] : [read(m)];
    return { kind: 'tools', text: prose(r, m, [`Let me read ${m.path}.`, `Next, how ${m.className} is built.`]), calls };
  }
  if (roll < 0.6)
    return {
      kind: 'tools',
      text: prose(r, m, [`Running the tests for ${m.functions[0]}.`]),
      calls: [call(tools.shell, { command: testCommand(r, m) }, testResult(r, m))],
    };
  if (roll < 0.7)
    return {
      kind: 'tools',
      text: prose(r, m, ['Checking the types.']),
      calls: [call(tools.shell, { command: 'pnpm tsc --noEmit' }, typeResult(r, m, r.pick(modules)))],
    };
  if (roll < 0.85) {
    const args = {
      [tools.pathKey]: m.path,
      [tools.oldKey]: `${m.functions[1]}(id: string`,
      [tools.newKey]: `${m.functions[1]}(id: string, ${m.setting}?: number`,
    };
    return {
      kind: 'tools',
      text: prose(r, m, [`Fixing ${m.functions[1]} in ${m.className}.`]),
      calls: [call(tools.edit, args, `The file ${m.path} has been updated.`)],
    };
  }
  if (roll < 0.92) {
    const path = m.path.replace(/\.ts$/, `-${r.pick(VERBS)}.ts`);
    return {
      kind: 'tools',
      text: prose(r, m, [`Writing a helper next to ${m.className}.`]),
      calls: [call(tools.write, { [tools.pathKey]: path, content: sourceOf(r, m, modules) }, `Wrote ${40 + r.int(50)} lines to ${path}`)],
    };
  }
  return {
    kind: 'tools',
    text: prose(r, m, ['Looking for the callers.']),
    calls: [call(tools.shell, shellArgs(r, m, tools), shellResult(r, m, modules))],
  };
}

/** What the assistant says before its calls: nothing, one sentence, or two (identifiers in the second). */
function prose(r: Rand, m: Module, firsts: string[]): string | undefined {
  const roll = r.next();
  if (roll < 0.35) return undefined;
  const first = r.pick(firsts);
  if (roll < 0.6) return first;
  return `${first} The ${m.functions[0]} path reads ${m.setting} before ${m.className}.${m.functions[1]} runs.`;
}

function testCommand(r: Rand, m: Module): string {
  return r.pick([`pnpm vitest run ${m.test}`, `pnpm test -- ${m.test}`, `npx vitest run ${m.test} -t "${m.functions[0]}"`]);
}

function testResult(r: Rand, m: Module): string {
  const exit = r.pick(EXIT_STYLES);
  if (r.chance(0.4))
    return ` RUN  v4.1.0 /repo\n\n ✓ ${m.test} (${3 + r.int(9)} tests) ${r.int(900)}ms\n\n Test Files  1 passed (1)\n${exit(0)}`;
  const error = r.pick([
    `TypeError: Cannot read properties of undefined (reading '${r.pick(['expiresAt', 'id', 'value', m.setting])}')`,
    `AssertionError: expected ${r.int(500)} to be ${r.int(500)} // Object.is equality`,
    `ReferenceError: ${m.functions[1]} is not defined`,
  ]);
  return [
    ` RUN  v4.1.0 /repo`,
    '',
    ` FAIL  ${m.test} > ${m.className} > ${m.functions[0]} ${r.pick(['evicts stale entries', 'keeps the newest entry', 'retries once'])}`,
    error,
    ` ❯ ${m.className}.${m.functions[0]} ${m.path}:${10 + r.int(80)}:${1 + r.int(30)}`,
    '',
    ` Test Files  1 failed (1)`,
    exit(1),
  ].join('\n');
}

function typeResult(r: Rand, m: Module, other: Module): string {
  const exit = r.pick(EXIT_STYLES);
  if (r.chance(0.3)) return exit(0);
  const line = `${m.path}(${10 + r.int(80)},${1 + r.int(30)}): error TS${r.pick(['2304', '2339', '2345'])}: ${r.pick([`Cannot find name '${other.className}'.`, `Property '${other.functions[1]}' does not exist on type '${m.className}'.`])}`;
  return `${line}\n\nFound 1 error in ${m.path}.\n${exit(2)}`;
}

function shellArgs(r: Rand, m: Module, tools: ToolFamily): Record<string, unknown> {
  const command = r.pick([
    `grep -rn "${m.functions[0]}" src`,
    `node scripts/migrate-${r.pick(NOUNS)}.js`,
    `git diff --stat`,
    `ls ${m.path.split('/').slice(0, -1).join('/')}`,
  ]);
  return tools.shell === 'Bash' ? { command, description: 'Look around' } : { command };
}

function shellResult(r: Rand, m: Module, modules: Module[]): string {
  const exit = r.pick(EXIT_STYLES);
  if (r.chance(0.35))
    return `Error: ENOENT: no such file or directory, open 'config/${r.pick(NOUNS)}.local.json'\n    at Object.openSync (node:fs:573:18)\n${exit(1)}`;
  const hits = modules.slice(0, 3 + r.int(4)).map((x) => `${x.path}:${1 + r.int(120)}:    this.peer.${m.functions[0]}(id);`);
  return `${hits.join('\n')}\n${exit(0)}`;
}

const SYSTEM_PROMPT = [
  'You are a coding agent working in a TypeScript repository. You can read files, write and edit them, and run shell commands.',
  'Read before you edit. Run the tests after each change and report what failed, with the exact error.',
  'Prefer small diffs. Never commit. Explain each change in a sentence.',
  ...Array.from(
    { length: 24 },
    (_, i) =>
      `Rule ${i + 1}: when a tool fails, read its output to the end before you try again; quote file paths exactly as the tools print them.`,
  ),
].join('\n');

// ---------------------------------------------------------------------------------------------
// Requests in each API

function toolSchemas(t: ToolFamily) {
  const str = { type: 'string' };
  return [
    { name: t.read, description: 'Read a file.', parameters: { type: 'object', properties: { [t.pathKey]: str }, required: [t.pathKey] } },
    {
      name: t.write,
      description: 'Write a file.',
      parameters: { type: 'object', properties: { [t.pathKey]: str, content: str }, required: [t.pathKey, 'content'] },
    },
    {
      name: t.edit,
      description: 'Replace text in a file.',
      parameters: { type: 'object', properties: { [t.pathKey]: str, [t.oldKey]: str, [t.newKey]: str } },
    },
    {
      name: t.shell,
      description: 'Run a shell command.',
      parameters: { type: 'object', properties: { command: str }, required: ['command'] },
    },
  ];
}

/** The request the agent sends after its first `steps` steps. */
export function requestOf(script: Script, api: Exclude<Api, 'gemini'>, steps = script.steps.length): Record<string, unknown> {
  const taken = script.steps.slice(0, steps);
  const schemas = toolSchemas(script.tools);
  if (api === 'chat') {
    const messages: unknown[] = [
      { role: 'system', content: script.system },
      { role: 'user', content: script.task },
    ];
    for (const s of taken) {
      if (s.kind === 'followup') {
        messages.push({ role: 'assistant', content: s.reply }, { role: 'user', content: s.user });
        continue;
      }
      const tool_calls = s.calls.map((c) => ({
        id: c.id,
        type: 'function',
        function: { name: c.name, arguments: JSON.stringify(c.args) },
      }));
      messages.push(
        { role: 'assistant', content: s.text ?? null, tool_calls },
        ...s.calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: c.result })),
      );
    }
    return { model: 'gen-model', messages, tools: schemas.map((f) => ({ type: 'function', function: f })), max_tokens: 8192, stream: true };
  }
  if (api === 'messages') {
    const messages: unknown[] = [{ role: 'user', content: script.task }];
    for (const s of taken) {
      if (s.kind === 'followup') {
        messages.push({ role: 'assistant', content: [{ type: 'text', text: s.reply }] }, { role: 'user', content: s.user });
        continue;
      }
      const text = s.text ? [{ type: 'text', text: s.text }] : [];
      messages.push(
        { role: 'assistant', content: [...text, ...s.calls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.args }))] },
        { role: 'user', content: s.calls.map((c) => ({ type: 'tool_result', tool_use_id: c.id, content: c.result })) },
      );
    }
    const tools = schemas.map(({ parameters, ...f }) => ({ ...f, input_schema: parameters }));
    return { model: 'gen-model', system: script.system, messages, tools, max_tokens: 8192, stream: true };
  }
  const input: unknown[] = [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: script.system }] },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: script.task }] },
  ];
  const said = (text: string) => ({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] });
  for (const s of taken) {
    if (s.kind === 'followup') {
      input.push(said(s.reply), { type: 'message', role: 'user', content: [{ type: 'input_text', text: s.user }] });
      continue;
    }
    if (s.text) input.push(said(s.text));
    for (const c of s.calls) input.push({ type: 'function_call', call_id: c.id, name: c.name, arguments: JSON.stringify(c.args) });
    for (const c of s.calls) input.push({ type: 'function_call_output', call_id: c.id, output: c.result });
  }
  return { model: 'gen-model', input, tools: schemas.map((f) => ({ type: 'function', ...f })), store: false, stream: true };
}
