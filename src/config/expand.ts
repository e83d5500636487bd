type Env = Record<string, string | undefined>;

export interface Expansion {
  problems: string[];
  /** Each expanded value's key path and the first variable it names, for the problem lines. */
  sources: Map<string, string>;
}

/** How a value that is one whole reference is read for its key (a number for `port: ${PORT}`). */
export type ReadWhole = (path: string[], text: string) => unknown;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const WHOLE = /^\$\{[^}]*\}$/;

/**
 * `${NAME}` and `${NAME:-default}` in string values only (never keys, never bare `$NAME`), in place; the default applies when NAME is
 * unset or empty, `$${` is a literal `${`. A value that expands to nothing is dropped so the key keeps its default; values under `skip`
 * (the environment set them, and it wins) are left alone.
 */
export function expandVariables(tree: Record<string, unknown>, env: Env, skip: ReadonlySet<string>, readWhole: ReadWhole): Expansion {
  const result: Expansion = { problems: [], sources: new Map() };
  walk(tree, [], { env, skip, readWhole }, result);
  return result;
}

interface Context {
  env: Env;
  skip: ReadonlySet<string>;
  readWhole: ReadWhole;
}

function walk(node: Record<string, unknown> | unknown[], path: string[], ctx: Context, result: Expansion): void {
  for (const [key, value] of Object.entries(node)) {
    const at = [...path, key];
    const dotted = at.join('.');
    if ([...ctx.skip].some((s) => dotted === s || dotted.startsWith(`${s}.`))) continue;
    if (typeof value === 'object' && value !== null) walk(value as Record<string, unknown>, at, ctx, result);
    if (typeof value !== 'string' || !value.includes('${')) continue;
    const { text, names, problem } = expandString(value, ctx.env);
    if (problem) {
      result.problems.push(`${dotted}: ${problem}`);
      continue;
    }
    if (names.length > 0) result.sources.set(dotted, `\${${names[0]}}`);
    if (text === '' && names.length > 0 && !Array.isArray(node)) delete node[key];
    else (node as Record<string, unknown>)[key] = names.length > 0 && WHOLE.test(value) ? ctx.readWhole(at, text) : text;
  }
}

function expandString(value: string, env: Env): { text: string; names: string[]; problem?: string } {
  let text = '';
  const names: string[] = [];
  let i = 0;
  for (let at = value.indexOf('${'); at >= 0; at = value.indexOf('${', i)) {
    if (at - 1 >= i && value[at - 1] === '$') {
      text += `${value.slice(i, at - 1)}\${`;
      i = at + 2;
      continue;
    }
    const end = value.indexOf('}', at + 2);
    if (end < 0) return { text, names, problem: 'a "${" without its closing "}" (write "$${" for a literal "${")' };
    const body = value.slice(at + 2, end);
    const split = body.indexOf(':-');
    const name = split < 0 ? body : body.slice(0, split);
    if (!NAME.test(name)) {
      return {
        text,
        names,
        problem: `"\${${name.slice(0, 40)}}" does not name a variable (\${NAME} or \${NAME:-default}; "$\${" for a literal "\${")`,
      };
    }
    const set = env[name];
    if (set !== undefined && set !== '') text += value.slice(i, at) + set;
    else if (split >= 0) text += value.slice(i, at) + body.slice(split + 2);
    else
      return { text, names, problem: `\${${name}}: the environment variable ${name} is not set (give a default with \${${name}:-value})` };
    names.push(name);
    i = end + 1;
  }
  return { text: text + value.slice(i), names };
}
