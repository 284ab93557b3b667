import { readFileSync } from 'node:fs';
import { format } from 'prettier';
import { describe, expect, it } from 'vitest';
import { CONFIG_DOC, renderConfigurationDoc } from '../scripts/docs-config.ts';

describe('docs/configuration.md', () => {
  it('lists every setting with its default, as src/config.ts has them (npm run docs:config)', async () => {
    const expected = await format(renderConfigurationDoc(), { filepath: CONFIG_DOC });
    expect(readFileSync(CONFIG_DOC, 'utf8')).toBe(expected);
  });
});
