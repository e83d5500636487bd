import { expect } from 'vitest';

/** Parses an RFC 8941 dictionary of tokens and integers, as the gateway writes it. */
export function parseCompactionHeader(value: string | null): Record<string, string | number> {
  expect(value, 'x-gateway-compaction header').toBeTruthy();
  const out: Record<string, string | number> = {};
  for (const member of value!.split(',')) {
    const match = /^\s*([a-z*][a-z0-9_.*-]*)=([A-Za-z*][\w:/!#$%&'*+.^`|~-]*|-?\d{1,15})\s*$/.exec(member);
    expect(match, `dictionary member ${JSON.stringify(member)}`).not.toBeNull();
    out[match![1]] = /^-?\d+$/.test(match![2]) ? Number(match![2]) : match![2];
  }
  return out;
}
