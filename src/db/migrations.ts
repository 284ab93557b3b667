import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Kysely } from 'kysely';
import { FileMigrationProvider, Migrator } from 'kysely/migration';

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../migrations');

/**
 * Brings the schema to the latest migration. Kysely's Postgres adapter takes an advisory lock,
 * so several instances starting at once migrate one after another.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the migrator works on any schema
export async function migrateToLatest(db: Kysely<any>): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: new FileMigrationProvider({ fs, path, migrationFolder: MIGRATIONS_DIR }),
  });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined || failed !== undefined) {
    throw new Error(`Migration failed${failed ? ` at ${failed.migrationName}` : ''}: ${String(error)}`, {
      cause: error,
    });
  }
}

/**
 * Throws, saying what to do, when migrations are pending: a process started with
 * MIGRATE_ON_START=false does not run on a schema older than its code.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the migrator works on any schema
export async function assertMigrated(db: Kysely<any>): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: new FileMigrationProvider({ fs, path, migrationFolder: MIGRATIONS_DIR }),
  });
  const pending = (await migrator.getMigrations()).filter((m) => m.executedAt === undefined);
  if (pending.length > 0) {
    throw new Error(
      `The database schema is not current (${pending.length} migrations pending, from ${pending[0]?.name}) ` +
        'and MIGRATE_ON_START is false: run `durable-mcp-tasks migrate` (or `npm run migrate`) as the owner role first.',
    );
  }
}
