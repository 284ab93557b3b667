// Experiment (not committed): CPU per task of the worker and of Postgres during a 1-worker drain.
import { readFileSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { captureHotPaths } from './lib/capture.ts';
import { inline, pgbench, scratchDb, startProc } from './lib/harness.ts';

const N = Number(process.env.N ?? 4000);
const ticks = (pid: number) => {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(f[11]) + Number(f[12]);
  } catch {
    return 0;
  }
};
const pgTicks = () => {
  let t = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (cmd.startsWith('postgres')) t += ticks(Number(d));
    } catch {}
  }
  return t;
};
const db = await scratchDb('probe');
try {
  const cap = await captureHotPaths(db.url, { name: 'analyze_numbers', arguments: { count: 1000 } });
  const lines = ['\\set n random(1, 1000000000000)'];
  for (const s of cap.create)
    lines.push(`${inline(s.text, s.values).replaceAll(cap.taskId, 'b:client_id-:n').replace(/\s+/g, ' ').trim()};`);
  const script = `${lines.join('\n')}\n`;
  for (let round = 0; round < Number(process.env.ROUNDS ?? 2); round++) {
    await db.sql('delete from tasks');
    pgbench(db.url, script, ['-M', 'simple', '-c', '10', '-j', '2', '-t', String(N / 10)]);
    const pg0 = pgTicks();
    const t0 = Date.now();
    const w = await startProc(['src/cli/main.ts', 'worker'], {
      DATABASE_URL: db.url, MIGRATE_ON_START: 'false', HOST: '127.0.0.1', METRICS_PORT: '',
    }, { ready: 'none', nodeArgs: process.env.PROF ? ['--cpu-prof', '--cpu-prof-dir=/tmp/prof'] : [] });
    for (;;) {
      const [{ n }] = (await db.sql(`select count(*)::int as n from tasks where status = 'completed'`)) as [{ n: number }];
      if (n >= N) break;
      await sleep(100);
    }
    const wt = ticks(w.child.pid!);
    const pg1 = pgTicks();
    const wall = (Date.now() - t0) / 1000;
    await w.stop();
    const [span] = (await db.sql(
      `select extract(epoch from (select max(last_updated_at) from tasks) - (select min(claimed_at) from task_attempts))::float8 as s`,
    )) as [{ s: number }];
    console.log(`round ${round}: ${Math.round(N / span.s)} tasks/s; worker CPU ${(wt * 10 / N).toFixed(2)} ms/task (incl. startup); postgres CPU ${(((pg1 - pg0) * 10) / N).toFixed(2)} ms/task; wall ${wall.toFixed(1)} s`);
  }
} finally {
  await db.drop();
}
