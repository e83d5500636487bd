// Types for agent-harness.mjs, so the TypeScript by-hand scripts (try-preserved, try-gemini) typecheck.
import type { SpawnOptions } from 'node:child_process';

export declare const ROOT: string;
export declare function write(file: string, text: string): void;
/** Runs a command to its end, bounded; resolves with its exit code (or the signal) and output. */
export declare function run(cmd: string, args: string[], options: SpawnOptions, timeoutMs: number): Promise<{ code: number | string; out: string }>;
/** The gateway as a process on a free loopback port; `log()` is everything it has written so far. */
export declare function startGateway(
  upstreamOrigin: string,
  options?: { built?: boolean; path?: string },
): Promise<{ origin: string; stop: () => Promise<void>; log: () => string }>;
/** The gateway as a process with a config file (`--config`), built dist/ by default. */
export declare function startGatewayWith(
  configFile: string,
  options?: { built?: boolean },
): Promise<{ origin: string; stop: () => Promise<void>; log: () => string }>;
