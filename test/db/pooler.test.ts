import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { startProcess } from '../../src/process/start.ts';
import { databaseEnv, throughPooler } from '../helpers/database-env.ts';
import { FAST_ENV, useTestServer } from '../helpers/server-process.ts';

const server = useTestServer();

/** PgBouncer's admin console: its view of the clients it serves. */
async function poolerClients(): Promise<Array<Record<string, string>>> {
  const url = new URL(inject('adminUrl'));
  url.hostname = '127.0.0.1';
  url.port = String(inject('pooler')!.port);
  url.pathname = '/pgbouncer';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    // The admin console speaks the simple query protocol only: a query without parameters uses it.
    return (await client.query<Record<string, string>>('show clients')).rows;
  } finally {
    await client.end();
  }
}

// When the suite runs through PgBouncer (TEST_PGBOUNCER=1), prove that it really does.
describe.runIf(throughPooler())('through PgBouncer in transaction mode', () => {
  it('the server’s pools go through the pooler, its LISTEN connection does not', async () => {
    expect((await server.mcp.callTool('echo', { text: 'hi' })).resultType).toBe('complete');
    const names = (await poolerClients())
      .filter((c) => c.database === server.tdb.name)
      .map((c) => c.application_name);
    expect(names).toEqual(expect.arrayContaining(['durable-mcp-tasks:all', 'durable-mcp-tasks:pg-boss']));
    expect(names).not.toContain('durable-mcp-tasks:listen');
  });

  it('a process that sends its timeouts as a startup parameter stops at once, saying what to do', async () => {
    const direct = server.tdb.url;
    const pooled = databaseEnv(direct).DATABASE_URL!;
    // Were the refusal retried like an outage, this would wait 10 minutes: past the test's timeout.
    const config = loadConfig({
      ...FAST_ENV,
      DATABASE_URL: pooled,
      DATABASE_DIRECT_URL: direct,
      DB_STARTUP_TIMEOUT_MS: '600000',
    });
    await expect(
      startProcess({ config, log: createLogger('silent'), role: 'server', tools: [] }),
    ).rejects.toThrow(/refused a startup parameter .*DB_STATEMENT_TIMEOUT_MS=0.*ALTER ROLE/);
  });
});
