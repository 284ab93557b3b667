import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { nodeVersionProblem } from '../src/node-version.ts';

describe('the Node version check every entry point runs first', () => {
  it('accepts 22.12 and later', () => {
    for (const v of ['22.12.0', '22.20.1', '23.0.0', '24.22.3'])
      expect(nodeVersionProblem(v)).toBeUndefined();
  });
  it('refuses older ones with one line saying what to do', () => {
    expect(nodeVersionProblem('20.20.2', false)).toBe(
      'durable-mcp-tasks needs Node >= 22.12; this is 20.20.2. Get one with `nvm install 24`, ' +
        'or run through npm: `npx -y node@24 --import tsx src/cli/main.ts start`.',
    );
    expect(nodeVersionProblem('20.20.2', true)).toMatch(
      /run through npm: `npx -y node@24 node_modules\/.bin\/durable-mcp-tasks start`/,
    );
    expect(nodeVersionProblem('22.11.0')).toMatch(/needs Node >= 22.12; this is 22.11.0/);
  });
});

const OLD_NODE = process.env.OLD_NODE ?? '/usr/bin/node';
const oldVersion = existsSync(OLD_NODE)
  ? execFileSync(OLD_NODE, ['--version'], { encoding: 'utf8' }).trim().slice(1)
  : undefined;

describe.skipIf(oldVersion === undefined || nodeVersionProblem(oldVersion) === undefined)(
  `every entry point on this machine's old Node (${oldVersion ?? 'none'})`,
  () => {
    for (const entry of [
      ['src/cli/main.ts', 'start'],
      ['src/main.ts', '--role=server'],
      ['workers/main.ts'],
    ]) {
      it(`${entry.join(' ')}: one line, exit 1`, () => {
        const run = spawnSync(OLD_NODE, ['--import', 'tsx', ...entry], {
          cwd: path.resolve(import.meta.dirname, '..'),
          encoding: 'utf8',
        });
        expect(run.status).toBe(1);
        expect(run.stderr.trim().split('\n')).toEqual([nodeVersionProblem(oldVersion, false)]);
      });
    }
  },
);
