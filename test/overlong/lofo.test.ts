import { describe, expect, it } from 'vitest';
import { lofoTable, loadFixtures } from '../../scripts/lofo.js';

// Issue 12's targets for generalisation, measured as `npm run classify:lofo` prints them.
describe('leave one family out', () => {
  const fixtures = loadFixtures();
  const { families, generalOnly } = lofoTable(fixtures);

  it('tags every fixture with a wording family', () => {
    for (const f of fixtures) expect(f.family, f.id).toMatch(/^[a-z0-9]+$/);
    expect(families.length).toBeGreaterThanOrEqual(15);
  });

  it('the general layer alone recognises at least 95% of the overlong fixtures', () => {
    expect(generalOnly.overlong).toBeGreaterThan(60);
    expect(generalOnly.recognised / generalOnly.overlong, generalOnly.wrong.join(', ')).toBeGreaterThanOrEqual(0.95);
  });

  it('the general layer alone raises no false alarm', () => {
    expect(generalOnly.falseAlarms, generalOnly.wrong.join(', ')).toBe(0);
  });

  it.each(families.map((r) => [r.family, r] as const))('%s, with its own rules off, raises no false alarm', (_f, row) => {
    expect(row.falseAlarms, row.wrong.join(', ')).toBe(0);
  });
});
