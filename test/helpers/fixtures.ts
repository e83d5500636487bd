import { readFileSync } from 'node:fs';

/** A real upstream error response (see test/fixtures/README.md). */
export interface ErrorFixture {
  id: string;
  provider: string;
  status: number;
  content_type: string;
  body: string;
  overlong: boolean;
  in_stream: boolean;
  source: string;
  notes: string;
}

export const fixtures: ErrorFixture[] = JSON.parse(readFileSync(new URL('../fixtures/upstream-errors.json', import.meta.url), 'utf8'));

/** The content type as a server would send it (some fixtures note how it was inferred). */
export function sentContentType(f: ErrorFixture): string {
  return f.content_type.split(' ')[0].replace(/;$/, '') || 'application/json';
}
