import { describe, expect, it } from 'vitest';
import { nodeVersionProblem } from '../src/node-version.ts';

describe('the Node version check every entry point runs first', () => {
  it('accepts 22.12 and later', () => {
    for (const v of ['22.12.0', '22.20.1', '23.0.0', '24.22.3'])
      expect(nodeVersionProblem(v)).toBeUndefined();
  });
  it('refuses older ones with one line saying what to do', () => {
    expect(nodeVersionProblem('20.20.2')).toBe(
      'durable-mcp-tasks needs Node >= 22.12; this is 20.20.2. Get one with `nvm install 24`, ' +
        'or run through npm: `npx -y node@24 --import tsx src/main.ts`.',
    );
    expect(nodeVersionProblem('22.11.0')).toMatch(/needs Node >= 22.12; this is 22.11.0/);
  });
});
