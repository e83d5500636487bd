import { readFileSync } from 'node:fs';

/** The version in package.json (shipped beside dist/ in the image and the npm package). */
export function gatewayVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}
