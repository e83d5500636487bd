import { createHash, timingSafeEqual } from 'node:crypto';

/** Bearer (OpenAI SDKs, ANTHROPIC_AUTH_TOKEN) or `x-api-key` (Anthropic SDKs); hashed to one length, all compared: timing says nothing. */
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

/** Basic auth's password (user ignored): a browser asks once and resends it, so a person can open the status page with a gateway key. */
export function basicPassword(authorization: string | undefined): string | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 && colon < decoded.length - 1 ? decoded.slice(colon + 1) : undefined;
}
