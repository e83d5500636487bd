import { describe, expect, it } from 'vitest';
import { loadFixtures, rulesWithout, score } from '../../scripts/lofo.js';
import { createClassifier } from '../../src/overlong/classify.js';

// Issue 12's targets for generalisation, measured as `npm run classify:lofo` prints them.
// Each test classifies for itself (nothing computed at collection time or shared), so a
// mutation run knows which test exercises which code.
const fixtures = loadFixtures();
const familyNames = [...new Set(fixtures.map((f) => f.family))].sort();
const generalOnly = () => score('general layer only', fixtures, createClassifier([]));

describe('leave one family out', () => {
  it('tags every fixture with a wording family', () => {
    for (const f of fixtures) expect(f.family, f.id).toMatch(/^[a-z0-9]+$/);
    expect(familyNames.length).toBeGreaterThanOrEqual(15);
  });

  it('the general layer alone recognises at least 95% of the overlong fixtures', () => {
    const row = generalOnly();
    expect(row.overlong).toBeGreaterThan(60);
    expect(row.recognised / row.overlong, row.wrong.join(', ')).toBeGreaterThanOrEqual(0.95);
  });

  it('the general layer alone raises no false alarm', () => {
    const row = generalOnly();
    expect(row.falseAlarms, row.wrong.join(', ')).toBe(0);
  });

  it.each(familyNames)('%s, with its own rules off, raises no false alarm', (family) => {
    const row = score(
      family,
      fixtures.filter((f) => f.family === family),
      createClassifier(rulesWithout(family)),
    );
    expect(row.falseAlarms, row.wrong.join(', ')).toBe(0);
  });
});
