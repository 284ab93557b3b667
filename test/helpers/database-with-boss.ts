import { afterAll, beforeAll } from 'vitest';
import { createBoss } from '../../src/queue/boss.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';

/** A test file's own database and a started pg-boss on it (no server): for tests that drive the store and the queue by hand. */
export interface DatabaseWithBoss {
  readonly tdb: TestDatabase;
  readonly boss: ReturnType<typeof createBoss>;
}

/** Creates them before the file's tests and stops them after; read the fields inside the tests. */
export function useDatabaseWithBoss(): DatabaseWithBoss {
  let tdb: TestDatabase | undefined;
  let boss: ReturnType<typeof createBoss> | undefined;
  beforeAll(async () => {
    tdb = await createTestDatabase();
    boss = createBoss({ connectionString: tdb.url, max: 2 });
    boss.on('error', () => {});
    await boss.start();
  });
  afterAll(async () => {
    await boss?.stop({ graceful: false, close: true });
    await tdb?.drop();
  });
  return {
    get tdb() {
      return tdb!;
    },
    get boss() {
      return boss!;
    },
  };
}
