// The alerting rules and the Grafana dashboard in deploy/: promtool checks the rules and runs their unit
// tests, every expression of the dashboard parses, every metric either names is in a real server's or
// worker's /metrics, and a real Prometheus scrapes them, evaluates the rules and sees a worker go away.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { RawMcp } from '../helpers/mcp.ts';
import { freePort } from '../helpers/ports.ts';
import { scrape } from '../helpers/prometheus.ts';
import { startTestProcess } from '../helpers/server-process.ts';
import { waitFor } from '../helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const ALERTS = path.join(ROOT, 'deploy/prometheus/alerts.yml');
const ALERT_TESTS = path.join(ROOT, 'deploy/prometheus/alerts.test.yml');
const DASHBOARD = path.join(ROOT, 'deploy/grafana/durable-mcp-tasks.json');
const OPERATIONS = path.join(ROOT, 'docs/operations.md');
/** The scrape jobs the rules assume (docs/operations.md): names starting with durable-mcp-tasks. */
const SERVER_JOB = 'durable-mcp-tasks';
const WORKER_JOB = 'durable-mcp-tasks-worker';

// Debian's prometheus package ships both. CI must run these tests; elsewhere they may be skipped.
const MISSING = ['promtool', 'prometheus'].filter(
  (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status !== 0,
);
const IN_CI = !['', '0', 'false'].includes(process.env.CI ?? '');
const suite = MISSING.length === 0 || IN_CI ? describe : describe.skip;
function requireTools(): void {
  if (MISSING.length > 0) {
    throw new Error(`${MISSING.join(' and ')} not on PATH: install Debian's prometheus package`);
  }
}

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
const rules = (): Rule[] =>
  (parseYaml(readFileSync(ALERTS, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

interface Target {
  expr: string;
  refId: string;
  datasource?: { uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  gridPos?: { x: number; y: number; w: number; h: number };
  targets?: Target[];
}
interface Dashboard {
  schemaVersion: number;
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: unknown; definition?: string }[] };
}
const dashboard = (): Dashboard => JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
const queryPanels = (d: Dashboard) => d.panels.filter((p) => p.type !== 'row');
/** What Grafana puts in place of the dashboard's variables, so promtool reads plain PromQL. */
const substitute = (expr: string) =>
  expr
    .replaceAll('$__rate_interval', '5m')
    .replaceAll('$__interval', '1m')
    .replace(/\$\{?(job|instance)\}?/g, '.*');
/** The selector inside each query variable's label_values(selector, label). */
const variableSelectors = (d: Dashboard) =>
  d.templating.list
    .filter((v) => v.type === 'query')
    .map((v) => /^label_values\((.+),\s*\w+\)$/.exec(v.definition ?? '')?.[1] ?? `unparsed: ${v.definition}`);

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);
/** The metric names a PromQL expression selects: identifiers that are not functions, keywords or labels. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const names = new Set<string>();
  for (const [, name, call] of bare.matchAll(/(?<![\w.])([a-zA-Z_:][\w:]*)\s*(\()?/g)) {
    if (call === undefined && !KEYWORDS.has(name!.toLowerCase())) names.add(name!);
  }
  return [...names];
}

/** The names a Prometheus exposition declares (by `# TYPE`), and those that have a sample line. */
function exposed(text: string): { types: Map<string, string>; sampled: Set<string> } {
  const types = new Map<string, string>();
  const sampled = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type !== null) types.set(type[1]!, type[2]!);
    const sample = /^([a-zA-Z_:][\w:]*)[{ ]/.exec(line);
    if (sample !== null) sampled.add(sample[1]!);
  }
  return { types, sampled };
}

/** Whether a name is a declared family, or a histogram's or summary's series. */
function isExposed(name: string, types: Map<string, string>): boolean {
  if (types.has(name)) return true;
  const series = /^(.+)_(bucket|sum|count)$/.exec(name);
  return series !== null && ['histogram', 'summary'].includes(types.get(series[1]!) ?? '');
}

function run(cmd: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd: ROOT }, (err, stdout, stderr) =>
      resolve({
        code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1,
        output: stdout + stderr,
      }),
    );
  });
}

/** GitHub's anchor of a markdown heading. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

suite('deploy/prometheus/alerts.yml', () => {
  beforeAll(requireTools);

  it('passes promtool check rules, and its unit tests make every alert fire and stay quiet', async () => {
    const check = await run('promtool', ['check', 'rules', ALERTS]);
    expect(check.code, check.output).toBe(0);
    expect(check.output).toContain(`SUCCESS: ${rules().length} rules found`);
    const unit = await run('promtool', ['test', 'rules', ALERT_TESTS]);
    expect(unit.code, unit.output).toBe(0);
    expect(unit.output).toContain('SUCCESS');

    // Each alert has a case where it fires and one where it does not.
    const tests = (
      parseYaml(readFileSync(ALERT_TESTS, 'utf8')) as {
        tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
      }
    ).tests.flatMap((t) => t.alert_rule_test);
    for (const { alert } of rules()) {
      const cases = tests.filter((t) => t.alertname === alert);
      expect(
        cases.some((t) => t.exp_alerts.length > 0),
        `${alert} fires in a test`,
      ).toBe(true);
      expect(
        cases.some((t) => t.exp_alerts.length === 0),
        `${alert} stays quiet in a test`,
      ).toBe(true);
    }
  });

  it('gives every alert a severity, a summary, a description and a runbook in docs/operations.md', () => {
    const anchors = new Set(
      readFileSync(OPERATIONS, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('#'))
        .map((l) => anchor(l.replace(/^#+/, ''))),
    );
    expect(rules().length).toBeGreaterThanOrEqual(7);
    for (const rule of rules()) {
      expect(['warning', 'critical'], rule.alert).toContain(rule.labels?.severity);
      expect(rule.for, rule.alert).toMatch(/^\d+[smh]$/);
      expect(rule.annotations?.summary, rule.alert).toBeTruthy();
      expect(rule.annotations?.description, rule.alert).toBeTruthy();
      const runbook = /^docs\/operations\.md#(.+)$/.exec(rule.annotations?.runbook_url ?? '');
      expect(runbook?.[1], `${rule.alert}'s runbook_url`).toBe(rule.alert.toLowerCase());
      expect(anchors.has(runbook![1]!), `a heading ${rule.alert} in docs/operations.md`).toBe(true);
    }
  });
});

suite('deploy/grafana/durable-mcp-tasks.json', () => {
  beforeAll(requireTools);

  it('has a Prometheus datasource variable, job and instance variables, and laid-out panels', () => {
    const d = dashboard();
    expect(d.schemaVersion).toBe(39);
    expect(d.uid).toBe('durable-mcp-tasks');
    const vars = new Map(d.templating.list.map((v) => [v.name, v]));
    expect(vars.get('DS_PROMETHEUS')).toMatchObject({ type: 'datasource', query: 'prometheus' });
    expect(vars.get('job')?.type).toBe('query');
    expect(vars.get('instance')?.type).toBe('query');
    expect(new Set(d.panels.map((p) => p.id)).size).toBe(d.panels.length);
    for (const p of d.panels) {
      const g = p.gridPos;
      expect(g, `gridPos of "${p.title}"`).toBeDefined();
      expect(g!.x >= 0 && g!.w > 0 && g!.x + g!.w <= 24 && g!.y >= 0 && g!.h > 0, `"${p.title}" fits`).toBe(
        true,
      );
      for (const q of d.panels) {
        const h = q.gridPos!;
        const overlap =
          p !== q && g!.x < h.x + h.w && h.x < g!.x + g!.w && g!.y < h.y + h.h && h.y < g!.y + g!.h;
        expect(overlap, `"${p.title}" and "${q.title}" overlap`).toBe(false);
      }
    }
    expect(queryPanels(d).length).toBeGreaterThan(10);
    for (const p of queryPanels(d)) {
      expect(p.datasource, `datasource of "${p.title}"`).toEqual({
        type: 'prometheus',
        uid: '${DS_PROMETHEUS}',
      });
      expect(p.targets?.length, `targets of "${p.title}"`).toBeGreaterThan(0);
      expect(new Set(p.targets!.map((t) => t.refId)).size).toBe(p.targets!.length);
      for (const t of p.targets!) {
        expect(t.datasource?.uid, `a target of "${p.title}"`).toBe('${DS_PROMETHEUS}');
        expect(t.expr, `"${p.title}" filters by job and instance`).toContain(
          'job=~"$job", instance=~"$instance"',
        );
      }
    }
  });

  it('has only expressions promtool parses', async () => {
    const d = dashboard();
    const exprs = [
      ...queryPanels(d).flatMap((p) =>
        p.targets!.map((t) => ({ record: `dashboard:panel_${p.id}:${t.refId}`, expr: substitute(t.expr) })),
      ),
      ...variableSelectors(d).map((s, i) => ({ record: `dashboard:variable_${i}`, expr: substitute(s) })),
    ];
    for (const { expr } of exprs) expect(expr).not.toContain('$');
    const dir = mkdtempSync(path.join(tmpdir(), 'dashboard-exprs-'));
    try {
      const file = path.join(dir, 'exprs.yml');
      writeFileSync(file, toYaml({ groups: [{ name: 'dashboard', rules: exprs }] }));
      const check = await run('promtool', ['check', 'rules', file]);
      expect(check.code, check.output).toBe(0);
      expect(check.output).toContain(`SUCCESS: ${exprs.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A Prometheus process on a free port with its own storage, scraping `targets` by job. */
async function startPrometheus(targets: Record<string, string>, ruleFile: string) {
  const dir = mkdtempSync(path.join(tmpdir(), 'prometheus-'));
  const port = await freePort();
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    rule_files: [ruleFile],
    scrape_configs: Object.entries(targets).map(([job, target]) => ({
      job_name: job,
      static_configs: [{ targets: [target] }],
    })),
  };
  writeFileSync(path.join(dir, 'prometheus.yml'), toYaml(config));
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  const keep = (chunk: Buffer) => (log = (log + chunk.toString()).slice(-8000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const url = `http://127.0.0.1:${port}`;
  /** The `data` of an API answer; throws once the process has exited (with its log). */
  const api = async <T>(pathAndQuery: string): Promise<T | undefined> => {
    if (child.exitCode !== null) throw new Error(`prometheus exited ${child.exitCode}:\n${log}`);
    const res = await fetch(`${url}${pathAndQuery}`).catch(() => undefined);
    if (res?.status !== 200) return undefined;
    return ((await res.json()) as { data: T }).data;
  };
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  await waitFor(() => api('/api/v1/status/buildinfo'), {
    timeoutMs: 20_000,
    what: () => `prometheus ready:\n${log}`,
  });
  return { api, stop, log: () => log };
}

interface RuleState {
  name: string;
  state: string;
  health: string;
  lastError?: string;
  lastEvaluation: string;
}

suite('the rules and the dashboard against a real server, worker and Prometheus', () => {
  let tdb: TestDatabase | undefined;
  let server: Awaited<ReturnType<typeof startTestProcess>> | undefined;
  let worker: Awaited<ReturnType<typeof startTestProcess>> | undefined;
  let prometheus: Awaited<ReturnType<typeof startPrometheus>> | undefined;

  beforeAll(async () => {
    requireTools();
    tdb = await createTestDatabase();
    server = await startTestProcess({ databaseUrl: tdb.url, role: 'server' });
    worker = await startTestProcess({ databaseUrl: tdb.url, role: 'worker', env: { METRICS_PORT: '0' } });
    // A finished task, so the labelled counters and histograms have series.
    const mcp = new RawMcp(server.url);
    const task = await mcp.callTool('analyze_numbers', { count: 100 });
    await mcp.waitForTask(task.taskId as string);
  });
  afterAll(async () => {
    await prometheus?.stop();
    await worker?.stop();
    await server?.stop();
    await tdb?.drop();
  });

  const exposition = async () => {
    const texts = [
      (await scrape(new URL(server!.url).origin)).text,
      (await scrape(worker!.metricsUrl!)).text,
    ];
    return exposed(texts.join('\n'));
  };
  const usedNames = () => {
    const d = dashboard();
    const exprs = [
      ...rules().map((r) => r.expr),
      ...queryPanels(d).flatMap((p) => p.targets!.map((t) => t.expr)),
      ...variableSelectors(d),
    ];
    return [...new Set(exprs.flatMap(metricNames))].sort();
  };

  it('every metric the rules and the dashboard name is in the /metrics of a server or a worker', async () => {
    const { types } = await exposition();
    const names = usedNames();
    expect(names).toContain('durable_mcp_worker_slots_busy');
    expect(names).toContain('durable_mcp_task_run_duration_seconds_bucket');
    // `up` is Prometheus's own series of a target (the next test finds it in Prometheus).
    expect(names.filter((n) => n !== 'up' && !isExposed(n, types))).toEqual([]);
  });

  it('a real Prometheus scrapes both, evaluates every rule, and the workers-absent alert trips when the worker stops', async () => {
    const hostPort = (url: string) => new URL(url).host;
    prometheus = await startPrometheus(
      { [SERVER_JOB]: hostPort(server!.url), [WORKER_JOB]: hostPort(worker!.metricsUrl!) },
      ALERTS,
    );
    const { api } = prometheus;
    const query = (q: string) =>
      api<{ result: { metric: Record<string, string> }[] }>(`/api/v1/query?query=${encodeURIComponent(q)}`);

    // Every name the rules and the dashboard use that has samples in /metrics is in Prometheus.
    const { sampled } = await exposition();
    const expected = usedNames().filter((n) => n === 'up' || sampled.has(n));
    expect(expected.length).toBeGreaterThan(15);
    let notYet: string[] = expected;
    await waitFor(
      async () => {
        const data = await query(`count by (__name__) ({job=~"${SERVER_JOB}.*"})`);
        const seen = new Set(data?.result.map((r) => r.metric.__name__));
        notYet = expected.filter((n) => !seen.has(n));
        return notYet.length === 0;
      },
      { timeoutMs: 30_000, what: () => `Prometheus holding ${notYet.join(', ')}` },
    );
    const up = await query(`up{job=~"${SERVER_JOB}.*"} == 1`);
    expect(up?.result.map((r) => r.metric.job).sort()).toEqual([SERVER_JOB, WORKER_JOB]);
    const scraped = Date.now();

    // Every rule evaluated after that, healthy, and nothing alerting on a healthy pair.
    const ruleStates = async () => {
      const data = await api<{ groups: { name: string; rules: RuleState[] }[] }>('/api/v1/rules');
      return data?.groups.find((g) => g.name === 'durable-mcp-tasks')?.rules;
    };
    let last: RuleState[] | undefined;
    await waitFor(
      async () => {
        last = await ruleStates();
        return (
          last?.length === rules().length &&
          last.every(
            (r) => r.health === 'ok' && Date.parse(r.lastEvaluation) > scraped && r.state === 'inactive',
          )
        );
      },
      { timeoutMs: 30_000, what: () => `every rule evaluated, ok and inactive: ${JSON.stringify(last)}` },
    );

    // The worker stops: its series go stale, and DurableMcpTasksWorkersAbsent goes pending (for: 2m).
    await worker!.stop();
    worker = undefined;
    await waitFor(
      async () => {
        last = await ruleStates();
        return last?.find((r) => r.name === 'DurableMcpTasksWorkersAbsent')?.state === 'pending';
      },
      { timeoutMs: 30_000, what: () => `DurableMcpTasksWorkersAbsent pending: ${JSON.stringify(last)}` },
    );
    const alerts = await api<{ alerts: { labels: Record<string, string>; state: string }[] }>(
      '/api/v1/alerts',
    );
    expect(alerts?.alerts).toContainEqual(
      expect.objectContaining({
        labels: { alertname: 'DurableMcpTasksWorkersAbsent', severity: 'critical' },
        state: 'pending',
      }),
    );
    expect(last!.every((r) => r.health === 'ok')).toBe(true);
  }, 120_000);
});
