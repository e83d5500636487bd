import { ENV_NAMES } from '../config/load.js';

export type Command = { run: 'help' } | { run: 'version' } | { run: 'check' } | { run: 'serve' };

export class UsageError extends Error {
  readonly code = 'GW_USAGE';
}

const FLAGS = [
  ['--config FILE', 'config file, YAML or JSON (else $CONFIG, else the shipped config/default.yaml)'],
  ['--check', 'load and validate the config, resolve every upstream, print what would run; exit 0 (valid) or 2, never listening'],
  ['--help', 'print this help and exit'],
  ['--version', 'print the version and exit'],
] as const;

/**
 * Only the flags above exist: anything else (`--port 9000`) is an error, not a silent default, since every other setting comes
 * from file or environment.
 */
export function parseArgs(argv: readonly string[]): Command {
  let command: Command = { run: 'serve' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') return { run: 'help' };
    if (arg === '--version' || arg === '-v') command = { run: 'version' };
    else if (arg === '--check') command = command.run === 'version' ? command : { run: 'check' };
    else if (arg === '--config') {
      if (!argv[i + 1] || argv[i + 1].startsWith('--')) throw new UsageError('--config needs a file path');
      i++;
    } else if (!arg.startsWith('--config=')) {
      throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
    }
  }
  return command;
}

export function usage(): string {
  const width = Math.max(...FLAGS.map(([flag]) => flag.length));
  return [
    'usage: compaction-gateway [--config FILE] [--check]',
    '',
    'A gateway for coding agents (chat completions, Responses, Anthropic Messages, Gemini) that compacts and replays requests rejected as too long.',
    '',
    'flags:',
    ...FLAGS.map(([flag, what]) => `  ${flag.padEnd(width)}  ${what}`),
    '',
    'Every setting is a config file key, or an environment variable:',
    wrap(ENV_NAMES.join(' '), 76, '  '),
    'In a config file, ${VAR} and ${VAR:-default} are read from the environment ($${ is a literal ${).',
    'Every key, its variable and default: docs/configuration.md.',
    '',
  ].join('\n');
}

export function flagList(): string {
  return FLAGS.map(([flag]) => flag).join(', ');
}

function wrap(text: string, width: number, indent: string): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + word.length + 1 > width) {
      lines.push(indent + line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(indent + line);
  return lines.join('\n');
}
