import { readFileSync } from 'node:fs';
import { format } from 'prettier';
import { describe, expect, it } from 'vitest';
import { CONFIG_DOC, renderConfigurationDoc } from '../scripts/docs-config.ts';
import { Metrics } from '../src/core/metrics.ts';

describe('docs/configuration.md', () => {
  it('lists every setting with its default, as src/config.ts has them (npm run docs:config)', async () => {
    const expected = await format(renderConfigurationDoc(), { filepath: CONFIG_DOC });
    expect(readFileSync(CONFIG_DOC, 'utf8')).toBe(expected);
  });
});

describe('the metrics in the docs', () => {
  it('README.md and docs/operations.md name every metric a process registers', () => {
    const metrics = new Metrics({ defaultMetrics: false });
    metrics.addStoreStats(async () => undefined);
    metrics.addPool('app', { totalCount: 0, idleCount: 0, waitingCount: 0 });
    const names = metrics.registry.getMetricsAsArray().map((m) => m.name);
    expect(names.length).toBeGreaterThan(15);
    for (const file of ['README.md', 'docs/operations.md']) {
      const text = readFileSync(file, 'utf8');
      expect(names.filter((n) => !text.includes(`\`${n}\``))).toEqual([]);
    }
  });
});
