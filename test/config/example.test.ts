import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';

// config/example.yaml is what operators copy: as shipped, it loads, and says what the defaults are.
describe('config/example.yaml', () => {
  it('loads as it is, to the defaults', () => {
    const file = fileURLToPath(new URL('../../config/example.yaml', import.meta.url));
    const config = loadConfig(['--config', file], {});
    expect(config).toMatchObject({ log: { level: 'info', format: 'auto' }, compaction: { maxReplays: 1 }, routes: [] });
  });
});
