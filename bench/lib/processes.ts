// Our own processes as the suite starts them: the HTTP server and the worker on a scratch database, with
// the node flags the image runs them with.
import { startProc, type Proc, type ScratchDb } from './harness.ts';

const SERVER_ENV = (db: ScratchDb): Record<string, string> => ({
  DATABASE_URL: db.url,
  MIGRATE_ON_START: 'false',
  RATE_LIMIT_POLLING: 'false',
  HOST: '127.0.0.1',
  // One principal drives every scenario, far past the per-principal quotas (the fairness scenario sets its own).
  MAX_ACTIVE_TASKS_PER_PRINCIPAL: '10000000',
  TASK_CREATE_RATE_PER_SECOND: '0',
  MAX_SESSIONS_PER_PRINCIPAL: '10000000',
});

/** As the image and `npm start`/`npm run server|worker` run node (see the Dockerfile). */
const NODE_FLAGS = ['--max-semi-space-size=8'];

/** `args`: more of the command line, e.g. `--tools <module>` (the worker must be given the same). */
export const server = (
  db: ScratchDb,
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
  args: string[] = [],
) =>
  startProc(
    ['src/cli/main.ts', 'server', ...args],
    { ...SERVER_ENV(db), ...env },
    { nodeArgs: [...NODE_FLAGS, ...nodeArgs] },
  );

export const worker = (db: ScratchDb, env: Record<string, string> = {}, args: string[] = []) =>
  startProc(
    ['src/cli/main.ts', 'worker', ...args],
    { ...SERVER_ENV(db), ...env },
    { ready: 'none', nodeArgs: NODE_FLAGS },
  );

export const mcpUrl = (p: Proc) => `http://127.0.0.1:${p.port}/mcp`;
