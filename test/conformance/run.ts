/**
 * The conformance gate (`npm run conformance`): starts the fixture server, runs the official suite
 * (@modelcontextprotocol/conformance, pinned) with `--requirements 2026-07-28` against it over real HTTP,
 * then reads every scenario's checks.json. It fails on ANY failed check, scored or not, on a scenario
 * that wrote no checks.json, and on a scenario count other than expected. No expected-failures list.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { startRuntime } from '../../src/runtime.ts';
import { CONFORMANCE_FIXTURE } from './fixture.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const OUT = path.join(ROOT, 'results', 'conformance');
const EXPECTED_SCENARIOS = 50; // 37 scored + 10 tasks + 3 pending at 2026-07-28
/** The one scenario the suite itself leaves as a stub (it only reports SKIPPED). */
const STUBS = new Set(['tasks-status-notifications']);

interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';
  errorMessage?: string;
}

const config = loadConfig({
  EMBEDDED_PG_DIR: '.data/conformance-postgres',
  EMBEDDED_PG_PORT: '54359',
  LOG_LEVEL: 'warn',
  ...process.env,
  HOST: '127.0.0.1',
  PORT: '0',
});
const runtime = await startRuntime({
  config,
  log: createLogger(config.LOG_LEVEL),
  role: 'all',
  ...CONFORMANCE_FIXTURE,
});
const url = runtime.url!.replace('127.0.0.1', 'localhost');

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
const bin = path.join(ROOT, 'node_modules/.bin/conformance');
const code = await new Promise<number | null>((resolve) => {
  const child = spawn(bin, ['server', '--url', url, '--requirements', '2026-07-28', '-o', OUT], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  child.once('exit', resolve);
});
await runtime.stop();

const dirs = readdirSync(OUT).filter((d) => d.startsWith('server-'));
const problems: string[] = [];
let passed = 0;
let warnings = 0;
if (dirs.length !== EXPECTED_SCENARIOS)
  problems.push(`expected ${EXPECTED_SCENARIOS} scenarios, found ${dirs.length}`);
for (const dir of dirs.sort()) {
  const scenario = dir.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T.*$/, '');
  const file = path.join(OUT, dir, 'checks.json');
  if (!existsSync(file)) {
    problems.push(`${scenario}: no checks.json (the scenario crashed)`);
    continue;
  }
  const checks = JSON.parse(readFileSync(file, 'utf8')) as Check[];
  const failed = checks.filter((c) => c.status === 'FAILURE');
  warnings += checks.filter((c) => c.status === 'WARNING').length;
  for (const c of failed) problems.push(`${scenario}: ${c.id}: ${c.errorMessage ?? 'FAILURE'}`);
  const successes = checks.filter((c) => c.status === 'SUCCESS').length;
  if (successes === 0 && !STUBS.has(scenario)) problems.push(`${scenario}: no check passed`);
  if (failed.length === 0) passed++;
}

console.log(
  `\nconformance: ${passed}/${dirs.length} scenarios without a failed check, ${warnings} warnings (suite exit ${code})`,
);
for (const p of problems) console.log(`  FAIL ${p}`);
console.log(`${passed} passed, ${dirs.length - passed} failed`);
process.exit(problems.length === 0 && code === 0 ? 0 : 1);
