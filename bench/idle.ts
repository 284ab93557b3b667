/**
 * What an idle process costs the database: queries per second and connections held.
 *   ADMIN_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx bench/idle.ts [seconds]
 * Creates a scratch database, then starts one process at a time (HTTP only, then worker only) and counts
 * every query its pg clients send (pg.Client.prototype.query is wrapped, so Kysely's pool, pg-boss's
 * pool and the LISTEN connection all count), and reads the connections it holds from pg_stat_activity.
 * Prints numbers, asserts nothing.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { startProcess, type Role } from '../src/process/start.ts';
import { SHIPPED_TOOLS } from '../src/tools/shipped/index.ts';

const admin = process.env.ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const seconds = Number(process.argv[2] ?? 30);
const name = `idle_bench_${randomBytes(4).toString('hex')}`;
const client = new pg.Client({ connectionString: admin });
await client.connect();
await client.query(`create database ${name}`);
const url = new URL(admin);
url.pathname = `/${name}`;

let counted = 0;
let counting = false;
// eslint-disable-next-line @typescript-eslint/unbound-method -- re-applied with the right `this` below
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  if (counting && this !== client) counted++;
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as typeof query;

const connections = async () => {
  const r = await client.query<{ app: string; n: string }>(
    `select application_name as app, count(*) as n from pg_stat_activity where datname = $1 group by 1 order by 1`,
    [name],
  );
  return r.rows.map((row) => `${row.app.replace('durable-mcp-tasks:', '')} ${row.n}`).join(', ');
};

try {
  for (const role of ['server', 'worker', 'all'] as Role[]) {
    const config = loadConfig({ ...process.env, DATABASE_URL: url.toString(), PORT: '0', LOG_LEVEL: 'warn' });
    const rt = await startProcess({ config, log: createLogger('warn'), role, tools: SHIPPED_TOOLS });
    await sleep(2_000); // past start-up
    counted = 0;
    counting = true;
    await sleep(seconds * 1000);
    counting = false;
    const held = await connections();
    await rt.stop();
    console.log(
      `${role.padEnd(7)} idle for ${seconds} s: ${counted} queries (${(counted / seconds).toFixed(2)}/s); connections: ${held}`,
    );
  }
} finally {
  pg.Client.prototype.query = query;
  await client.query(`drop database if exists ${name} with (force)`);
  await client.end();
}
