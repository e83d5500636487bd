import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Checks a presented bearer token against the configured gateway keys. Both sides are hashed to
 * equal length and every key is compared, so timing says nothing about which bytes matched.
 */
export function createKeyCheck(keys: readonly string[]): (authorization: string | undefined) => boolean {
  const digests = keys.map(sha256);
  return (authorization) => {
    const token = bearerToken(authorization);
    if (token === undefined) return false;
    const presented = sha256(token);
    let ok = false;
    for (const digest of digests) ok = timingSafeEqual(presented, digest) || ok;
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
