// The dashboard's activity curves: tasks created, finished and in flight, minute by minute, of every
// principal (the operator's view: not scoped by principal).
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';

/** One minute of activity: tasks created and finished in it, and tasks in flight at its end. */
export interface ActivityMinute {
  minute: Date;
  created: number;
  finished: number;
  inFlight: number;
}

/**
 * The last `minutes` minutes, oldest first: created and finished per minute (throughput), and how many tasks
 * were working or waiting for input at the end of each (the backlog). One scan of the tasks that were
 * active in the window, grouped by minute; the curve is computed from the groups.
 */
export async function adminActivity(db: Kysely<Database>, minutes = 60): Promise<ActivityMinute[]> {
  const span = Math.min(Math.max(Math.trunc(minutes), 1), 24 * 60);
  const { rows } = await sql<{ now: Date; c: Date; f: Date | null; n: number }>`
    with bounds as (select date_trunc('minute', now()) - ${span - 1} * interval '1 minute' as start)
    select date_trunc('minute', now()) as now,
           date_trunc('minute', t.created_at) as c,
           case when t.status in ('completed', 'failed', 'cancelled')
                then date_trunc('minute', t.last_updated_at) end as f,
           count(*)::int as n
      from tasks t, bounds b
     where t.parent_task_id is null -- (a map's items are their parent's work)
       and (t.created_at >= b.start
        or t.status in ('working', 'input_required')
        or t.last_updated_at >= b.start)
     group by 1, 2, 3`.execute(db);
  const MINUTE = 60_000;
  const end = (rows[0]?.now ?? new Date(Math.floor(Date.now() / MINUTE) * MINUTE)).getTime();
  const start = end - (span - 1) * MINUTE;
  const series: ActivityMinute[] = Array.from({ length: span }, (_, i) => ({
    minute: new Date(start + i * MINUTE),
    created: 0,
    finished: 0,
    inFlight: 0,
  }));
  const index = (t: Date) => Math.round((t.getTime() - start) / MINUTE);
  for (const row of rows) {
    const c = index(row.c);
    const f = row.f === null ? undefined : index(row.f);
    if (c >= 0 && c < span) series[c]!.created += row.n;
    if (f !== undefined && f >= 0 && f < span) series[f]!.finished += row.n;
    // In flight at the end of minute i: created in or before it, not finished by then.
    for (let i = Math.max(c, 0); i < span && (f === undefined || i < f); i++) series[i]!.inFlight += row.n;
  }
  return series;
}
