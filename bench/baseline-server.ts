/**
 * The floor for the HTTP paths: a bare Hono app on @hono/node-server, nothing of ours but the SQL.
 *   node --import tsx bench/baseline-server.ts   (env: PORT, DATABASE_URL, BASELINE_SPEC: a JSON file)
 * Routes:
 *   POST /get     parses the JSON-RPC body and runs tasks/get's own SELECT (captured from the real code) on a
 *                 pg pool of 10, answering with the row as JSON;
 *   POST /get-named  the same with the SELECT as a named prepared statement (as the server runs it);
 *   POST /bytes/<name>  answers with fixed bytes (a real response of the server, for tools/list and a sync
 *                 tools/call), after parsing the body as the server would.
 * Started by bench/run.ts; never part of src/.
 */
import { readFileSync } from 'node:fs';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import pg from 'pg';

interface Spec {
  getSql: string;
  /** Where the principal and the task id go in the SELECT's parameters. */
  getParams: Array<'principal' | 'taskId'>;
  bytes: Record<string, string>;
}

const spec = JSON.parse(readFileSync(process.env.BASELINE_SPEC!, 'utf8')) as Spec;
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const app = new Hono();

for (const named of [false, true]) {
  app.post(named ? '/get-named' : '/get', async (c) => {
    const body = await c.req.json<{ id: number; params: { taskId: string } }>();
    const values = spec.getParams.map((p) => (p === 'principal' ? 'local' : body.params.taskId));
    const { rows } = await pool.query(
      named ? { name: 'tasks_get', text: spec.getSql, values } : { text: spec.getSql, values },
    );
    return c.json({ jsonrpc: '2.0', id: body.id, result: rows[0] ?? null });
  });
}
for (const [name, bytes] of Object.entries(spec.bytes)) {
  app.post(`/bytes/${name}`, async (c) => {
    await c.req.json();
    return c.body(bytes, 200, { 'content-type': 'application/json' });
  });
}

const server = serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: '127.0.0.1' }, () =>
  process.stdout.write('ready\n'),
);
process.on('SIGTERM', () => {
  server.close();
  void pool.end().then(() => process.exit(0));
});
