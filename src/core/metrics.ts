// Prometheus metrics of one process (prom-client). Names follow the conventions: a `durable_mcp_` prefix,
// base units (`_seconds`), `_total` for counters, and low-cardinality labels only: a method the server
// serves, a registered tool, a status, an error code. Never a task id or a principal.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

const PREFIX = 'durable_mcp_';
/** From a fast poll to an hours-long data job. */
const TASK_SECONDS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14_400];
const REQUEST_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** What a collector reads on scrape (cluster-wide numbers, cached by its owner). */
export interface StoreStats {
  tasksByStatus: Record<string, number>;
  runsWaiting: number;
  /** Runs scheduled for later: durable sleeps, waits for signals, retry backoffs. */
  runsDelayed: number;
  oldestWaitingRunSeconds: number;
  expiredNotSwept: number;
  /** Bytes of complete artifacts stored. */
  artifactBytes: number;
  /**
   * Attempts whose handler still ran past its cancel grace when its worker last said (each holds a slot;
   * a worker's own gauge, worker_stuck_legs, is the live count).
   */
  stuckLegs: number;
}

/** A pg pool's counts, as node-postgres keeps them. */
export interface PoolCounts {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
}

export class Metrics {
  readonly registry = new Registry();

  readonly requests = new Counter({
    name: `${PREFIX}requests_total`,
    help: 'MCP requests answered, by method and outcome ("ok", "aborted" when the client left or cancelled, or the JSON-RPC error code).',
    labelNames: ['method', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly requestDuration = new Histogram({
    name: `${PREFIX}request_duration_seconds`,
    help: 'Time to answer an MCP request, by method (a stream: until its final message).',
    labelNames: ['method'] as const,
    buckets: REQUEST_SECONDS,
    registers: [this.registry],
  });
  readonly openStreams = new Gauge({
    name: `${PREFIX}open_subscription_streams`,
    help: 'subscriptions/listen streams open on this process.',
    registers: [this.registry],
  });
  readonly quotaRefusals = new Counter({
    name: `${PREFIX}quota_refusals_total`,
    help: 'Requests refused because a principal was over a quota, by the limit (its setting name).',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });
  readonly taskChangeReads = new Counter({
    name: `${PREFIX}task_change_reads_total`,
    help: "Reads of changed tasks for this process's open streams: one query per batch of changes, however many streams wait.",
    registers: [this.registry],
  });
  readonly taskEventReads = new Counter({
    name: `${PREFIX}task_event_reads_total`,
    help: "Shared reads of appended task events for this process's event streams: one query per batch of appends, however many streams follow them.",
    registers: [this.registry],
  });
  readonly taskEventsSent = new Counter({
    name: `${PREFIX}task_events_sent_total`,
    help: 'Task events sent to readers (tasks/stream, the events endpoint, 2025-11-25 streams).',
    registers: [this.registry],
  });
  readonly tasksCreated = new Counter({
    name: `${PREFIX}tasks_created_total`,
    help: 'Tasks created (tools/call answered with a task), by tool.',
    labelNames: ['tool'] as const,
    registers: [this.registry],
  });
  readonly triggerRequests = new Counter({
    name: `${PREFIX}trigger_requests_total`,
    help: 'Webhook deliveries (POST /triggers/{name}), by trigger (a defined one, else "unknown") and outcome: accepted, not_found, unverified, too_large, invalid_json, invalid_arguments, conflict, over_quota, unavailable.',
    labelNames: ['trigger', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly tasksFinished = new Counter({
    name: `${PREFIX}tasks_finished_total`,
    help: 'Tasks a worker of this process brought to a terminal status, by tool and status.',
    labelNames: ['tool', 'status'] as const,
    registers: [this.registry],
  });
  readonly scheduleTicks = new Counter({
    name: `${PREFIX}schedule_ticks_total`,
    help: 'Schedule ticks this process handled, by schedule and outcome: "fired" (its task created), "queued" (waits for the last run, overlap queue), "dropped" (skipped by overlap, or missed and not caught up), "failed" (no task: unknown tool, refused arguments, a quota).',
    labelNames: ['schedule', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly scheduleLag = new Gauge({
    name: `${PREFIX}schedule_lag_seconds`,
    help: "How far a schedule's next tick is behind the clock when this process last looked (0 once its pass fired what was due).",
    labelNames: ['schedule'] as const,
    registers: [this.registry],
  });
  readonly runDuration = new Histogram({
    name: `${PREFIX}task_run_duration_seconds`,
    help: 'Time a worker ran a task leg (claim to settle), by tool and how the leg ended.',
    labelNames: ['tool', 'outcome'] as const,
    buckets: TASK_SECONDS,
    registers: [this.registry],
  });
  readonly timeToStart = new Histogram({
    name: `${PREFIX}task_time_to_start_seconds`,
    help: "Time from a task's creation to its first claim by a worker, by tool.",
    labelNames: ['tool'] as const,
    buckets: TASK_SECONDS,
    registers: [this.registry],
  });
  readonly inputWait = new Histogram({
    name: `${PREFIX}task_input_wait_seconds`,
    help: 'Time a task spent in input_required before the answers that resumed it (tasks/update), by tool.',
    labelNames: ['tool'] as const,
    buckets: TASK_SECONDS,
    registers: [this.registry],
  });
  readonly resumedLegs = new Counter({
    name: `${PREFIX}task_resumed_legs_total`,
    help: 'Legs that continue a task an earlier attempt started (after input, a crash, a lease takeover or a redelivery), by tool.',
    labelNames: ['tool'] as const,
    registers: [this.registry],
  });
  readonly crashRetries = new Counter({
    name: `${PREFIX}task_crash_retries_total`,
    help: 'Handler crashes handed back for a retry, by tool.',
    labelNames: ['tool'] as const,
    registers: [this.registry],
  });
  readonly leasesLost = new Counter({
    name: `${PREFIX}task_leases_lost_total`,
    help: 'Running attempts stopped because another attempt took the task over, by tool.',
    labelNames: ['tool'] as const,
    registers: [this.registry],
  });
  readonly leaseTakeovers = new Counter({
    name: `${PREFIX}task_lease_takeovers_total`,
    help: 'Tasks whose lease lapsed (a dead or stuck worker), re-enqueued by the sweeper of this process.',
    registers: [this.registry],
  });
  readonly redeliveries = new Counter({
    name: `${PREFIX}queue_redeliveries_total`,
    help: 'Queued runs a worker fetched but never claimed (it died), redelivered by the sweeper of this process.',
    registers: [this.registry],
  });
  readonly cancelsDelivered = new Counter({
    name: `${PREFIX}task_cancels_delivered_total`,
    help: 'Cancel requests that reached a running handler (its signal fired), by tool.',
    labelNames: ['tool'] as const,
    registers: [this.registry],
  });

  readonly artifactBytesWritten = new Counter({
    name: `${PREFIX}artifact_written_bytes_total`,
    help: "Bytes of artifacts this process's workers wrote (ctx.artifact, and results too large to store inline).",
    registers: [this.registry],
  });
  readonly artifactBytesRead = new Counter({
    name: `${PREFIX}artifact_read_bytes_total`,
    help: 'Bytes of artifacts this process sent to clients, by how ("download" or "resources_read").',
    labelNames: ['via'] as const,
    registers: [this.registry],
  });

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** Cluster-wide gauges read from the store at scrape time (`read` caches; at most one query per scrape). */
  addStoreStats(read: () => Promise<StoreStats | undefined>): void {
    let last: Promise<StoreStats | undefined> | undefined;
    // One read serves every gauge of a scrape: the first gauge's collect starts it, the others join.
    const current = () => {
      last ??= read().finally(() => setTimeout(() => (last = undefined), 0));
      return last;
    };
    new Gauge({
      name: `${PREFIX}tasks`,
      help: 'Tasks in the store, by status (cluster-wide).',
      labelNames: ['status'] as const,
      registers: [this.registry],
      async collect() {
        const stats = await current();
        this.reset();
        for (const [status, n] of Object.entries(stats?.tasksByStatus ?? {})) this.set({ status }, n);
      },
    });
    const gauge = (name: string, help: string, pick: (s: StoreStats) => number) =>
      new Gauge({
        name: `${PREFIX}${name}`,
        help,
        registers: [this.registry],
        async collect() {
          const stats = await current();
          if (stats !== undefined) this.set(pick(stats));
        },
      });
    gauge(
      'queue_runs_waiting',
      'Task runs queued and due, not yet fetched by a worker (cluster-wide).',
      (s) => s.runsWaiting,
    );
    gauge(
      'queue_runs_delayed',
      'Task runs scheduled for later (durable sleeps, waits for signals, retry backoffs): tasks that hold no worker (cluster-wide).',
      (s) => s.runsDelayed,
    );
    gauge(
      'queue_oldest_waiting_run_age_seconds',
      'Age of the oldest due run still waiting for a worker; 0 when none waits (cluster-wide).',
      (s) => s.oldestWaitingRunSeconds,
    );
    gauge(
      'tasks_expired_not_swept',
      'Active tasks past their TTL that no sweep has expired yet (cluster-wide).',
      (s) => s.expiredNotSwept,
    );
    gauge(
      'artifact_bytes',
      'Bytes of complete artifacts stored in Postgres (cluster-wide; the TOAST storage they take is about the same).',
      (s) => s.artifactBytes,
    );
  }

  /** This process's worker slots in use (legs running now). */
  addWorkerSlots(busy: () => number): void {
    this.#processGauge(
      'worker_slots_busy',
      "This process's worker slots running a task leg now (a parked task holds none).",
      busy,
    );
  }

  /** This process's stuck legs: stopped (a cancel, a lost lease) yet still running past CANCEL_GRACE_MS. */
  addStuckLegs(stuck: () => number): void {
    this.#processGauge(
      'worker_stuck_legs',
      "This process's legs still running CANCEL_GRACE_MS after their signal fired (a cancel or a lost lease): each holds a worker slot until its handler returns.",
      stuck,
    );
  }

  /** A gauge of this process that reads its value on scrape. */
  #processGauge(name: string, help: string, read: () => number): void {
    new Gauge({
      name: `${PREFIX}${name}`,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  /** Connections of a pg pool, labelled by its role in the process. */
  addPool(pool: string, counts: PoolCounts): void {
    const existing = this.registry.getSingleMetric(`${PREFIX}db_pool_connections`) as
      Gauge<'pool' | 'state'> | undefined;
    const pools = existing === undefined ? new Map<string, PoolCounts>() : POOLS.get(existing)!;
    pools.set(pool, counts);
    if (existing !== undefined) return;
    const g = new Gauge({
      name: `${PREFIX}db_pool_connections`,
      help: 'Connections of a Postgres pool of this process, by pool and state (total, idle, waiting clients).',
      labelNames: ['pool', 'state'] as const,
      registers: [this.registry],
      collect() {
        for (const [name, c] of pools) {
          this.set({ pool: name, state: 'total' }, c.totalCount);
          this.set({ pool: name, state: 'idle' }, c.idleCount);
          this.set({ pool: name, state: 'waiting' }, c.waitingCount);
        }
      },
    });
    POOLS.set(g, pools);
  }

  /** The text exposition format. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

const POOLS = new WeakMap<object, Map<string, PoolCounts>>();
