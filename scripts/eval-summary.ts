import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent } from 'undici';
import type { Api } from '../src/dialects/types.js';
import { evaluate, MODES, type CaseResult, type Mode, type SummarizerChoice } from './eval/evaluate.js';
import { CATEGORIES } from './eval/probes.js';
import { gateFailures, missedExamples, renderReport, type Gate } from './eval/report.js';
import { withEvalSection } from './eval/section.js';
import { generatedCases, GENERATED, generatedName, RECORDED, recordedCases, type EvalCase } from './eval/sessions.js';
import { startStandIn, type StandIn } from '../test/helpers/provider.js';
import { extractiveSummarizer } from './eval/extractive.js';

/*
 * npm run eval:summary [-- options]: what a compaction keeps of the span it condenses, per mode,
 * over the recorded agent sessions and generated ones. Loopback only, unless a real summarizer is
 * named. See USAGE.
 */

const USAGE = `usage: npm run eval:summary -- [options]
  --write                 update the "What a compaction keeps" section of BENCHMARKS.md
  --ci                    gate at --min-recall 0.95 unless it is given (also when CI is set)
  --min-recall X          exit 1 when a gated recall is under X (0..1)
  --gate LIST             categories the gate applies to (default paths,commands; of ${CATEGORIES.join(',')})
  --gate-modes LIST       modes the gate applies to (default ${MODES.join(',')})
  --modes LIST            modes to run (default ${MODES.join(',')})
  --sessions LIST         recorded, generated, or session names (default recorded,generated)
  --verbose               list probes that were not kept
  --summarizer-url URL    a real summarizer instead of the stand-in, with:
  --model M                 its model
  --api chat|messages|responses|gemini   its API (default chat)
  --api-key-env NAME        the environment variable holding its key`;

/** Whatever happens, the run ends; a real summarizer takes seconds a call. */
const HARD_LIMIT_MS = 10 * 60_000;
const HARD_LIMIT_REAL_MS = 60 * 60_000;
const DEFAULT_CI_RECALL = 0.95;
const MISSED_SHOWN = 8;
const BENCHMARKS = fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url));
const STAND_IN = 'the loopback stand-in (the first sentence of each message, cut to its max tokens; tool calls never copied)';

class UsageError extends Error {}

interface Options {
  write: boolean;
  verbose: boolean;
  modes: Mode[];
  sessions: string[];
  gate?: Gate;
  real?: SummarizerChoice;
}

function options(argv: string[], env: NodeJS.ProcessEnv): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      write: { type: 'boolean', default: false },
      ci: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      'min-recall': { type: 'string' },
      gate: { type: 'string', default: 'paths,commands' },
      'gate-modes': { type: 'string', default: MODES.join(',') },
      modes: { type: 'string', default: MODES.join(',') },
      sessions: { type: 'string', default: 'recorded,generated' },
      'summarizer-url': { type: 'string' },
      model: { type: 'string' },
      api: { type: 'string' },
      'api-key-env': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) throw new UsageError('');
  const ci = values.ci || Boolean(env.CI && env.CI !== 'false' && env.CI !== '0');
  const minRecall = values['min-recall'] === undefined ? (ci ? DEFAULT_CI_RECALL : undefined) : Number(values['min-recall']);
  if (minRecall !== undefined && !(minRecall >= 0 && minRecall <= 1))
    throw new UsageError(`--min-recall must be between 0 and 1, not ${values['min-recall']}`);
  const modes = listOf(values.modes, MODES, '--modes');
  const gate =
    minRecall === undefined
      ? undefined
      : { minRecall, categories: listOf(values.gate, CATEGORIES, '--gate'), modes: listOf(values['gate-modes'], MODES, '--gate-modes') };
  return {
    write: values.write,
    verbose: values.verbose,
    modes,
    sessions: values.sessions.split(',').filter(Boolean),
    gate,
    real: realSummarizer(values, env),
  };
}

function realSummarizer(values: Record<string, string | boolean | undefined>, env: NodeJS.ProcessEnv): SummarizerChoice | undefined {
  const url = values['summarizer-url'] as string | undefined;
  if (url === undefined) {
    if (values.model || values.api || values['api-key-env'])
      throw new UsageError('--model, --api and --api-key-env go with --summarizer-url');
    return undefined;
  }
  if (!values.model) throw new UsageError('--summarizer-url needs --model');
  const api = (values.api as string | undefined) ?? 'chat';
  if (!['chat', 'messages', 'responses', 'gemini'].includes(api))
    throw new UsageError(`--api must be chat, messages, responses or gemini, not ${api}`);
  const keyName = values['api-key-env'] as string | undefined;
  const apiKey = keyName ? env[keyName] : undefined;
  if (keyName && !apiKey) throw new UsageError(`${keyName} is not set`);
  return { url, model: values.model as string, api: api as Api, apiKey };
}

function listOf<T extends string>(text: string, allowed: readonly T[], flag: string): T[] {
  const list = text.split(',').filter(Boolean);
  const unknown = list.filter((x) => !allowed.includes(x as T));
  if (unknown.length > 0 || list.length === 0) throw new UsageError(`${flag} takes a list of ${allowed.join(', ')}; got ${text}`);
  return list as T[];
}

function casesOf(sessions: readonly string[]): EvalCase[] {
  const generatedNames = new Map(GENERATED.map((g) => [generatedName(g), g]));
  const unknown = sessions.filter((s) => s !== 'recorded' && s !== 'generated' && !(s in RECORDED) && !generatedNames.has(s));
  if (unknown.length > 0)
    throw new UsageError(`no session ${unknown.join(', ')}; there are ${[...Object.keys(RECORDED), ...generatedNames.keys()].join(', ')}`);
  const recorded = sessions.includes('recorded') ? Object.keys(RECORDED) : sessions.filter((s) => s in RECORDED);
  const generated = sessions.includes('generated') ? GENERATED : GENERATED.filter((g) => sessions.includes(generatedName(g)));
  return [...recordedCases(recorded), ...generatedCases(generated)];
}

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let o: Options;
  let cases: EvalCase[];
  try {
    o = options(argv, env);
    cases = casesOf(o.sessions);
  } catch (err) {
    if (!(err instanceof UsageError) && !(err instanceof TypeError)) throw err;
    process.stderr.write(`${err.message ? `${err.message}\n` : ''}${USAGE}\n`);
    return 2;
  }
  const limit = o.real ? HARD_LIMIT_REAL_MS : HARD_LIMIT_MS;
  setTimeout(() => {
    process.stderr.write(`eval:summary: still running after ${limit / 1000} s; giving up\n`);
    process.exit(1);
  }, limit).unref();

  const standIn: StandIn | null = o.real ? null : await startStandIn({ summarizer: extractiveSummarizer().answer });
  const dispatcher = new Agent();
  try {
    const summarizer = o.real ?? { url: standIn!.origin };
    // A real summarizer is slow: say how far it got.
    const onResult = o.real
      ? (r: CaseResult) => process.stderr.write(`eval:summary: ${r.session} at ${Math.round(r.at * 100)}%, ${r.mode}: ${r.outcome}\n`)
      : undefined;
    const evaluation = await evaluate(cases, { summarizer, dispatcher, modes: o.modes, onResult });
    const label = o.real ? `${o.real.model} at ${o.real.url} (${o.real.api})` : STAND_IN;
    const markdown = renderReport(evaluation, { modes: o.modes, summarizer: label, gate: o.gate });
    process.stdout.write(`${markdown}\n`);
    if (o.verbose) process.stdout.write(`\nNot kept:\n${missedExamples(evaluation.results, o.modes, MISSED_SHOWN) || '(nothing)'}\n`);
    if (o.write) {
      const old = existsSync(BENCHMARKS) ? readFileSync(BENCHMARKS, 'utf8') : '';
      writeFileSync(BENCHMARKS, withEvalSection(old, markdown));
      process.stderr.write(`eval:summary: wrote ${BENCHMARKS}\n`);
    }
    const failures = o.gate ? gateFailures(evaluation.results, o.gate) : [];
    for (const f of failures) process.stderr.write(`eval:summary: ${f}\n`);
    return failures.length > 0 ? 1 : 0;
  } finally {
    await dispatcher.close();
    await standIn?.close();
  }
}

main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`eval:summary: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
