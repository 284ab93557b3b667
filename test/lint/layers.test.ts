import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');

// One linter for the file: each new one builds the typed program again (seconds each under load).
let linter: ESLint | undefined;

async function layerErrors(file: string, code: string): Promise<string[]> {
  const eslint = (linter ??= new ESLint({ cwd: ROOT }));
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  const messages = result?.messages ?? [];
  expect(messages.filter((m) => m.fatal === true)).toEqual([]);
  return messages.filter((m) => m.ruleId === 'layers/one-way').map((m) => m.message);
}

// Linting with type information is slow on a loaded machine: the budget is the whole file's.
describe('the one-way folder graph (eslint-layers.js)', { timeout: 120_000 }, () => {
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
    // launch/ starts tasks; it answers to no transport.
    expect(
      await layerErrors('src/launch/tool-task.ts', "export * from '../protocol/dispatch.ts';\n"),
    ).toHaveLength(1);
  });

  it.each(['rev2025-11-25', 'rev2026-07-28'])(
    'lets only the composition root import %s',
    async (revision) => {
      for (const file of [
        'src/http/app.ts',
        'src/protocol/dispatch.ts',
        'src/worker/sweeper.ts',
        'src/index.ts',
      ]) {
        const up = file.split('/').length > 2 ? '../' : './';
        expect(await layerErrors(file, `export * from '${up}${revision}/index.ts';\n`)).toEqual([
          `src/${file.split('/')[1]} may not import src/${revision} (allowed: only src/process may)`,
        ]);
      }
      expect(
        await layerErrors('src/process/revisions.ts', `export * from '../${revision}/index.ts';\n`),
      ).toEqual([]);
      // A revision sits over the shared handlers, never the other way round, never over the HTTP layer,
      // and never over the other revision.
      expect(await layerErrors(`src/${revision}/index.ts`, "export * from '../http/app.ts';\n")).toHaveLength(
        1,
      );
      const other = revision === 'rev2025-11-25' ? 'rev2026-07-28' : 'rev2025-11-25';
      expect(
        await layerErrors(`src/${revision}/index.ts`, `export * from '../${other}/index.ts';\n`),
      ).toHaveLength(1);
    },
  );

  it('accepts imports that follow it', async () => {
    expect(await layerErrors('src/tasks/service.ts', "export * from '../db/database.ts';\n")).toEqual([]);
    expect(await layerErrors('src/http/app.ts', "export * from '../protocol/dispatch.ts';\n")).toEqual([]);
    // A task started from the server's side: the worker, the HTTP layer and the protocol may use launch/.
    expect(await layerErrors('src/worker/pool.ts', "export * from '../launch/tool-task.ts';\n")).toEqual([]);
    expect(await layerErrors('src/http/app.ts', "export * from '../launch/tool-task.ts';\n")).toEqual([]);
  });
});
