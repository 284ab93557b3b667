// The operational probes: /healthz (alive) and /readyz (database reachable and migrated, not draining),
// on an HTTP instance and on a worker's own listener (METRICS_PORT).
import { sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { postMcp } from '../helpers/mcp.ts';
import { startTestProcess, useTestServer } from '../helpers/server-process.ts';

async function probe(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

/** Polls until the probe answers `status` (the database check is cached for a second). */
async function until(url: string, status: number): Promise<{ status: number; body: string }> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = await probe(url);
    if (r.status === status || Date.now() > deadline) return r;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('probes on an HTTP instance', () => {
  const server = useTestServer();
  const base = () => new URL('/', server.rt.url).href.slice(0, -1);

  it('answers /healthz and /readyz, revealing nothing but the status', async () => {
    expect(await probe(`${base()}/healthz`)).toEqual({ status: 200, body: '{"status":"ok"}' });
    expect(await probe(`${base()}/readyz`)).toEqual({ status: 200, body: '{"status":"ready"}' });
  });

  it('is not ready while the schema is behind, and ready again once it is current', async () => {
    const db = server.tdb.db;
    const last = await db
      .selectFrom('kysely_migration' as never)
      .selectAll()
      .orderBy('name' as never, 'desc')
      .limit(1)
      .executeTakeFirstOrThrow();
    await sql`delete from kysely_migration where name = ${(last as { name: string }).name}`.execute(db);
    expect(await until(`${base()}/readyz`, 503)).toEqual({ status: 503, body: '{"status":"unavailable"}' });
    await sql`insert into kysely_migration (name, timestamp) values (${(last as { name: string }).name}, ${(last as { timestamp: string }).timestamp})`.execute(
      db,
    );
    expect((await until(`${base()}/readyz`, 200)).status).toBe(200);
  });

  it('is not ready while the database refuses connections, and ready once it accepts them', async () => {
    const admin = new pg.Client({ connectionString: inject('adminUrl') });
    await admin.connect();
    const name = server.tdb.name;
    try {
      await admin.query(`alter database ${name} allow_connections false`);
      await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1`, [name]);
      expect((await until(`${base()}/readyz`, 503)).status).toBe(503);
      // Alive all the same: liveness never asks the database.
      expect((await probe(`${base()}/healthz`)).status).toBe(200);
    } finally {
      await admin.query(`alter database ${name} allow_connections true`);
      await admin.end();
    }
    expect((await until(`${base()}/readyz`, 200)).status).toBe(200);
  });
});

describe('draining', () => {
  const server = useTestServer();

  it('answers 503 on /readyz from SIGTERM on, while still serving MCP for DRAIN_DELAY_MS', async () => {
    const rt = await startTestProcess({ databaseUrl: server.tdb.url, env: { DRAIN_DELAY_MS: '4000' } });
    const base = new URL('/', rt.url).href.slice(0, -1);
    expect((await probe(`${base}/readyz`)).status).toBe(200);
    const stopped = rt.stop();
    expect(await probe(`${base}/readyz`)).toEqual({ status: 503, body: '{"status":"unavailable"}' });
    expect((await probe(`${base}/healthz`)).status).toBe(200);
    const discover = await postMcp(rt.url, 'server/discover', {}, { caps: {} });
    expect(discover.status).toBe(200);
    await stopped;
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  });
});

describe('probes on a worker (METRICS_PORT)', () => {
  const server = useTestServer();

  it('serves /healthz and /readyz on a listener of its own, and nothing else there', async () => {
    const worker = await startTestProcess({
      databaseUrl: server.tdb.url,
      role: 'worker',
      env: { METRICS_PORT: '0' },
    });
    try {
      expect(worker.url).toBe('');
      const base = worker.metricsUrl!;
      expect(await probe(`${base}/healthz`)).toEqual({ status: 200, body: '{"status":"ok"}' });
      expect(await probe(`${base}/readyz`)).toEqual({ status: 200, body: '{"status":"ready"}' });
      expect((await probe(`${base}/mcp`)).status).toBe(404);
    } finally {
      await worker.stop();
    }
  });
});
