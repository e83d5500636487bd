import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Checks a presented gateway key against the configured ones: a Bearer token (OpenAI's SDKs,
 * Claude Code with ANTHROPIC_AUTH_TOKEN) or an `x-api-key` (Anthropic's SDKs, Claude Code with
 * ANTHROPIC_API_KEY); either may carry it. Every presented key is hashed to equal length and
 * compared with every configured key, so timing says nothing about which bytes matched.
 */
export function createKeyCheck(keys: readonly string[]): (authorization: string | undefined, apiKey?: string | string[]) => boolean {
  const digests = keys.map(sha256);
  return (authorization, apiKey) => {
    const presented = [bearerToken(authorization), typeof apiKey === 'string' && apiKey.trim() ? apiKey.trim() : undefined];
    let ok = false;
    for (const token of presented) {
      if (token === undefined) continue;
      const digest = sha256(token);
      for (const key of digests) ok = timingSafeEqual(digest, key) || ok;
    }
    return ok;
  };
}

function bearerToken(authorization: string | undefined): string | undefined {
  const match = /^Bearer\s+(.+)$/i.exec(authorization ?? '');
  return match ? match[1].trim() : undefined;
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * The password of HTTP Basic credentials (`Authorization: Basic base64(user:password)`), which a
 * browser asks its user for and then sends with every request to the same place: how a person
 * opens the status page with a gateway key. The user name is ignored.
 */
export function basicPassword(authorization: string | undefined): string | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 && colon < decoded.length - 1 ? decoded.slice(colon + 1) : undefined;
}
