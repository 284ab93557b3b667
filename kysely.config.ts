import { PostgresDialect } from 'kysely';
import { defineConfig } from 'kysely-ctl';
import pg from 'pg';
import { loadConfig } from './src/config.ts';

const config = loadConfig();
if (config.DATABASE_URL === undefined) {
  throw new Error('kysely-ctl needs DATABASE_URL (npm start migrates the embedded Postgres by itself)');
}

export default defineConfig({
  dialect: new PostgresDialect({
    pool: new pg.Pool({ connectionString: config.DATABASE_DIRECT_URL ?? config.DATABASE_URL, max: 1 }),
  }),
  migrations: { migrationFolder: 'migrations' },
});
