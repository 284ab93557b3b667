/**
 * The conformance gate (`npm run conformance`): starts the fixture server, runs the official suite
 * (@modelcontextprotocol/conformance, pinned) against it over real HTTP for both eras the endpoint
 * serves: `--requirements 2026-07-28` (stateless) and `--spec-version 2025-11-25 --suite all`
 * (sessions), then reads every scenario's checks.json. It fails on ANY failed check, scored or not, on
 * a scenario that wrote no checks.json or passed no check, and on a scenario count other than
 * expected. No expected-failures list.
 *
 *   node --import tsx test/conformance/run.ts [--url URL] [--only 2026-07-28|2025-11-25]
 *   (with --url, the suite runs against a server already running there, e.g. nginx in front of two)
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { startProcess } from '../../src/process/start.ts';
import { CONFORMANCE_FIXTURE } from './fixture.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const RESULTS = path.join(ROOT, 'results', 'conformance');
const RUNS = [
  // 37 scored + 10 tasks + 3 pending at 2026-07-28.
  { name: '2026-07-28', args: ['--requirements', '2026-07-28'], scenarios: 50 },
  // 30 scored + session lifecycle + 2 pending (JSON Schema 2020-12, SSE polling): 84 checks.
  { name: '2025-11-25', args: ['--spec-version', '2025-11-25', '--suite', 'all'], scenarios: 33 },
];
/** The one scenario the suite itself leaves as a stub (it only reports SKIPPED). */
const STUBS = new Set(['tasks-status-notifications']);

interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';
  errorMessage?: string;
}

const { values } = parseArgs({ options: { url: { type: 'string' }, only: { type: 'string' } } });
let runtime: Awaited<ReturnType<typeof startProcess>> | undefined;
let url = values.url;
if (url === undefined) {
  const config = loadConfig({
    EMBEDDED_PG_DIR: '.data/conformance-postgres',
    EMBEDDED_PG_PORT: '54359',
    LOG_LEVEL: 'warn',
    ...process.env,
    HOST: '127.0.0.1',
    PORT: '0',
  });
  runtime = await startProcess({
    config,
    log: createLogger(config.LOG_LEVEL),
    role: 'all',
    ...CONFORMANCE_FIXTURE,
  });
  url = runtime.url!.replace('127.0.0.1', 'localhost');
}

const problems: string[] = [];
let passedTotal = 0;
let scenariosTotal = 0;
for (const run of RUNS.filter((r) => values.only === undefined || r.name === values.only)) {
  const out = path.join(RESULTS, run.name);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const bin = path.join(ROOT, 'node_modules/.bin/conformance');
  console.log(`--- ${run.name}: conformance server --url ${url} ${run.args.join(' ')}`);
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(bin, ['server', '--url', url, ...run.args, '-o', out], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.once('exit', resolve);
  });
  const dirs = readdirSync(out).filter((d) => d.startsWith('server-'));
  let passed = 0;
  let warnings = 0;
  if (dirs.length !== run.scenarios) {
    problems.push(`${run.name}: expected ${run.scenarios} scenarios, found ${dirs.length}`);
  }
  for (const dir of dirs.sort()) {
    const scenario = dir.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T.*$/, '');
    const file = path.join(out, dir, 'checks.json');
    if (!existsSync(file)) {
      problems.push(`${run.name} ${scenario}: no checks.json (the scenario crashed)`);
      continue;
    }
    const checks = JSON.parse(readFileSync(file, 'utf8')) as Check[];
    const failed = checks.filter((c) => c.status === 'FAILURE');
    warnings += checks.filter((c) => c.status === 'WARNING').length;
    for (const c of checks.filter((x) => x.status === 'FAILURE' || x.status === 'WARNING')) {
      problems.push(`${run.name} ${scenario}: ${c.id}: ${c.status}: ${c.errorMessage ?? ''}`);
    }
    const successes = checks.filter((c) => c.status === 'SUCCESS').length;
    if (successes === 0 && !STUBS.has(scenario)) problems.push(`${run.name} ${scenario}: no check passed`);
    if (failed.length === 0) passed++;
  }
  if (code !== 0) problems.push(`${run.name}: the suite exited ${code}`);
  console.log(
    `conformance ${run.name}: ${passed}/${dirs.length} scenarios without a failed check, ${warnings} warnings`,
  );
  passedTotal += passed;
  scenariosTotal += dirs.length;
}
await runtime?.stop();

for (const p of problems) console.log(`  FAIL ${p}`);
console.log(`${passedTotal} passed, ${scenariosTotal - passedTotal} failed`);
process.exit(problems.length === 0 ? 0 : 1);
