import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

async function layerErrors(file: string, code: string): Promise<string[]> {
  const eslint = new ESLint({ cwd: ROOT });
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  const messages = result?.messages ?? [];
  expect(messages.filter((m) => m.fatal === true)).toEqual([]);
  return messages.filter((m) => m.ruleId === 'layers/one-way').map((m) => m.message);
}

describe('the one-way folder graph (eslint-layers.js)', () => {
  it('refuses an import against the graph', async () => {
    expect(await layerErrors('src/core/limits.ts', "export * from '../db/database.ts';\n")).toEqual([
      'src/core may not import src/db (allowed: none)',
    ]);
    expect(
      await layerErrors('src/tasks/service.ts', "export * from '../protocol/dispatch.ts';\n"),
    ).toHaveLength(1);
    expect(
      await layerErrors('src/process/start.ts', "export * from '../../workers/main.ts';\n"),
    ).toHaveLength(1);
  });

  it('lets only the composition root import the 2025-11-25 era', async () => {
    for (const file of [
      'src/http/app.ts',
      'src/protocol/dispatch.ts',
      'src/worker/sweeper.ts',
      'src/index.ts',
    ]) {
      expect(
        await layerErrors(
          file,
          "export * from './rev2025-11-25/index.ts';\n".replace(
            './',
            file.split('/').length > 2 ? '../' : './',
          ),
        ),
      ).toEqual([
        `src/${file.split('/')[1]} may not import src/rev2025-11-25 (allowed: only src/process may)`,
      ]);
    }
    expect(await layerErrors('src/process/start.ts', "export * from '../rev2025-11-25/index.ts';\n")).toEqual(
      [],
    );
    // The era sits over the core, never the other way round, and never over the HTTP layer.
    expect(await layerErrors('src/rev2025-11-25/post.ts', "export * from '../http/app.ts';\n")).toHaveLength(
      1,
    );
  });

  it('accepts imports that follow it', async () => {
    expect(await layerErrors('src/tasks/service.ts', "export * from '../db/database.ts';\n")).toEqual([]);
    expect(await layerErrors('src/http/app.ts', "export * from '../protocol/dispatch.ts';\n")).toEqual([]);
  });
});
