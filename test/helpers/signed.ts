import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/*
 * What the strict stand-ins use to sign the state they hand out (thinking signatures, encrypted
 * reasoning) and to check it when it comes back: a payload the stand-in can read, sealed with an
 * HMAC under a secret of this process, so a forged or edited value is caught like a real one.
 */

const SECRET = randomBytes(32);
const NOTHING: ReadonlySet<string> = new Set();

/** JSON of `value` with object keys sorted and the `drop` keys removed at every depth:
 * values count, key order and formatting do not. */
function canonical(value: unknown, drop: ReadonlySet<string> = NOTHING): string {
  return JSON.stringify(sorted(value, drop));
}

function sorted(value: unknown, drop: ReadonlySet<string>): unknown {
  if (Array.isArray(value)) return value.map((v) => sorted(v, drop));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[key];
    if (!drop.has(key) && v !== undefined) out[key] = sorted(v, drop);
  }
  return out;
}

/** sha256 of the canonical form, base64url. */
export function digest(value: unknown, drop?: ReadonlySet<string>): string {
  return createHash('sha256')
    .update(canonical(value ?? null, drop))
    .digest('base64url');
}

const mac = (body: string) => createHmac('sha256', SECRET).update(body).digest('base64url');

/** `base64url(JSON payload).hmac`. */
export function seal(payload: object): string {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${body}.${mac(body)}`;
}

/** The payload of a sealed value, or null when it does not parse or its HMAC fails. */
export function unseal<T>(token: unknown): T | null {
  if (typeof token !== 'string') return null;
  const [body, tag, ...rest] = token.split('.');
  if (!body || !tag || rest.length > 0) return null;
  const expected = Buffer.from(mac(body));
  const got = Buffer.from(tag);
  if (expected.length !== got.length || !timingSafeEqual(expected, got)) return null;
  try {
    return JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as T;
  } catch {
    return null;
  }
}
