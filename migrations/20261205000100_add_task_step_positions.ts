import type { Kysely } from 'kysely';

// The determinism guard: each step's position in the handler's run (0, 1, 2, … in call order), so a
// replay that asks for a different step at a recorded position is caught (the tool's code changed under a
// running task). Steps recorded before this column have none, and are not checked.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('task_steps').addColumn('position', 'integer').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('task_steps').dropColumn('position').execute();
}
