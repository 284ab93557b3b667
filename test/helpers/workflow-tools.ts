// The `--tools` module of the workflow chaos run (`npm run test:workflow-chaos`): tools that each use
// the durable primitives (steps, sleeps, ctx.patched, signals, ctx.map, step and tool retries,
// NonRetryableError, artifacts, onExhausted: 'pause') and whose results follow exactly from their
// arguments, so that the test computes every answer itself (the `expected*` functions below). Each body
// that runs (a step's function, a map item, an artifact's source, a handler) appends one line to a file
// of its process under WORKFLOW_LOG_DIR before it does anything else: the test reads them back to count
// the starts of each body and to check when each started against the database's checkpoints and leases.
// Workers are SIGKILLed under this module: a line written before the kill survives it (the kernel has it).
import { createCipheriv, createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { defineTool, NonRetryableError, type ToolDefinition } from '../../src/index.ts';
import { SHIPPED_TOOLS } from '../../src/tools/shipped/index.ts';

/** One start of a body, as a line of `<dir>/starts-<pid>.log`. */
export interface BodyStart {
  /** What started: a step's function, a map item's, an artifact's source, a handler, a signal wait. */
  kind: 'step' | 'item' | 'artifact' | 'handler' | 'wait';
  /** The task it ran for (a map item: its map's task). */
  task: string;
  /** The step's, artifact's (`artifact:<name>`) or map's name; the tool's for a handler. */
  name: string;
  /** A map item's index. */
  index?: number;
  /** The run the context said it was (`attempt` of a step or map item). */
  attempt?: number;
  pid: number;
  /** Date.now() when it started. */
  at: number;
}

/** The directory the bodies log to; none (nothing logged) when the module is served elsewhere. */
const logDir = () => process.env.WORKFLOW_LOG_DIR;

function logStart(start: Omit<BodyStart, 'pid' | 'at'>): void {
  const dir = logDir();
  if (dir === undefined || dir === '') return;
  const line: BodyStart = { ...start, pid: process.pid, at: Date.now() };
  appendFileSync(path.join(dir, `starts-${process.pid}.log`), `${JSON.stringify(line)}\n`);
}

/** Every body start logged under `dir`, from every process. */
export function readStarts(dir: string, files: readonly string[]): BodyStart[] {
  return files
    .filter((f) => f.startsWith('starts-'))
    .flatMap((f) => readFileSync(path.join(dir, f), 'utf8').split('\n'))
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as BodyStart);
}

/** The file whose presence lets `wf_pause`'s gate through for this seed (the test creates it). */
export const gateFile = (dir: string, seed: number) => path.join(dir, `open-${seed}`);

const taskIdOf = (ctx: { taskId: string | undefined }) => ctx.taskId ?? 'sync';

// ------------------------------------------------------------------------------------------------

/** A step's value in wf_steps. */
const stepValue = (seed: number, i: number) => (seed * 31 + i * i * 7) % 1_000;
/** What wf_steps' patched branch adds. */
const bonus = (seed: number) => seed % 97;

export const expectedSteps = (seed: number, steps: number) =>
  Array.from({ length: steps }, (_, i) => stepValue(seed, i)).reduce((a, b) => a + b, 0) + bonus(seed);

/** Steps (`s-0` … taking `stepMs` each), a durable sleep half way, then a branch behind ctx.patched. */
export const wfSteps = defineTool({
  name: 'wf_steps',
  description: 'steps, a durable sleep and a patched branch (workflow chaos tool)',
  inputSchema: z.object({
    seed: z.number().int().min(0),
    steps: z.number().int().min(2).max(50),
    stepMs: z.number().int().min(0).default(100),
    sleepMs: z.number().int().min(0).default(1_500),
  }),
  taskSupport: 'required',
  async handler({ seed, steps, stepMs, sleepMs }, ctx) {
    let sum = 0;
    for (let i = 0; i < steps; i++) {
      sum += await ctx.step(`s-${i}`, async (signal) => {
        logStart({ kind: 'step', task: taskIdOf(ctx), name: `s-${i}` });
        await delay(stepMs, undefined, { signal });
        return stepValue(seed, i);
      });
      if (i === Math.floor(steps / 2)) await ctx.sleep('nap', sleepMs);
    }
    // Every task here starts on this code: the marker is recorded once and replays `true`.
    if (await ctx.patched('bonus')) {
      sum += await ctx.step('bonus', () => {
        logStart({ kind: 'step', task: taskIdOf(ctx), name: 'bonus' });
        return bonus(seed);
      });
    }
    return { content: [{ type: 'text', text: `sum ${sum}` }], structuredContent: { sum } };
  },
});

// ------------------------------------------------------------------------------------------------

/** wf_signal's answer: the payload's `n` added to the seed, or that the wait timed out. */
export const expectedSignal = (seed: number, n: number | undefined) =>
  n === undefined ? `timed out (seed ${seed})` : `delivered ${seed + n}`;

/**
 * A signal: created, its URL put in the status message (`Signal go: <url>`), then a step of `prepareMs`
 * (a delivery meanwhile comes before the wait), then the wait (`Waiting for go: POST <url>`) with
 * `timeoutMs`, then a step `after` whatever the wait's outcome.
 */
export const wfSignal = defineTool({
  name: 'wf_signal',
  description: 'waits for a signal whose URL is in its status message (workflow chaos tool)',
  inputSchema: z.object({
    seed: z.number().int().min(0),
    prepareMs: z.number().int().min(0).default(0),
    timeoutMs: z.number().int().min(1_000),
  }),
  taskSupport: 'required',
  async handler({ seed, prepareMs, timeoutMs }, ctx) {
    const go = await ctx.createSignal('go', { timeoutMs });
    ctx.status(`Signal go: ${go.url}`);
    await ctx.step('prepare', async (signal) => {
      logStart({ kind: 'step', task: taskIdOf(ctx), name: 'prepare' });
      await delay(prepareMs, undefined, { signal });
      return prepareMs;
    });
    logStart({ kind: 'wait', task: taskIdOf(ctx), name: 'go' });
    const outcome = await ctx.waitForSignal(go, { statusMessage: `Waiting for go: POST ${go.url}` });
    const n = outcome.status === 'delivered' ? (outcome.payload as { n?: unknown } | null)?.n : undefined;
    const text = await ctx.step('after', () => {
      logStart({ kind: 'step', task: taskIdOf(ctx), name: 'after' });
      return expectedSignal(seed, typeof n === 'number' ? n : undefined);
    });
    return { content: [{ type: 'text', text }] };
  },
});

// ------------------------------------------------------------------------------------------------

/** A map item's value. */
const itemValue = (seed: number, x: number) => (seed * 1_000 + x * x) % 10_007;

export const expectedMap = (seed: number, items: number) =>
  Array.from({ length: items }, (_, x) => itemValue(seed, x)).reduce((a, b) => a + b, 0);

/** An item of wf_map that fails on its first run (`failEvery` apart); retried by the map's policy. */
export const failsOnce = (index: number, failEvery: number) => failEvery > 0 && index % failEvery === 3;

/**
 * `ctx.map` over `items` items (after a step that lists them): each item whose index `failsOnce` throws
 * on its first run, and the item `failForGood` (when given) on every run, which fails the map.
 */
export const wfMap = defineTool({
  name: 'wf_map',
  description: 'a map of items, some failing once, one maybe failing for good (workflow chaos tool)',
  inputSchema: z.object({
    seed: z.number().int().min(0),
    items: z.number().int().min(1).max(1_000),
    failEvery: z.number().int().min(0).default(0),
    failForGood: z.number().int().min(0).optional(),
    concurrency: z.number().int().min(1).default(16),
  }),
  taskSupport: 'required',
  async handler({ seed, items, failEvery, failForGood, concurrency }, ctx) {
    const list = await ctx.step('list', () => {
      logStart({ kind: 'step', task: taskIdOf(ctx), name: 'list' });
      return Array.from({ length: items }, (_, i) => i);
    });
    const values = await ctx.map(
      'square',
      list,
      (x, index, _signal, { attempt }) => {
        logStart({ kind: 'item', task: taskIdOf(ctx), name: 'square', index, attempt });
        if (index === failForGood) throw new Error(`item ${index} fails for good`);
        if (attempt === 1 && failsOnce(index, failEvery)) throw new Error(`item ${index} fails once`);
        return itemValue(seed, x);
      },
      { concurrency, retry: { maxAttempts: 3, backoff: { initialMs: 100, factor: 1 } } },
    );
    const sum = values.reduce((a, b) => a + b, 0);
    return { content: [{ type: 'text', text: `sum ${sum}` }], structuredContent: { sum } };
  },
});

// ------------------------------------------------------------------------------------------------

/** What wf_step_retry's step returns once it gets through. */
export const expectedStepRetry = (seed: number) => seed * 3 + 1;

/** The step `flaky` with its own policy (`maxAttempts`), failing its first `failures` runs. */
export const wfStepRetry = defineTool({
  name: 'wf_step_retry',
  description: 'a step with its own retry policy that fails its first runs (workflow chaos tool)',
  inputSchema: z.object({
    seed: z.number().int().min(0),
    failures: z.number().int().min(0),
    maxAttempts: z.number().int().min(1),
  }),
  taskSupport: 'required',
  async handler({ seed, failures, maxAttempts }, ctx) {
    const value = await ctx.step(
      'flaky',
      (_signal, { attempt }) => {
        logStart({ kind: 'step', task: taskIdOf(ctx), name: 'flaky', attempt });
        if (attempt <= failures) throw new Error(`flaky run ${attempt}`);
        return expectedStepRetry(seed);
      },
      { retry: { maxAttempts, backoff: { initialMs: 50, factor: 2 } } },
    );
    const done = await ctx.step('done', () => {
      logStart({ kind: 'step', task: taskIdOf(ctx), name: 'done' });
      return value;
    });
    return { content: [{ type: 'text', text: `value ${done}` }], structuredContent: { value: done } };
  },
});

// ------------------------------------------------------------------------------------------------

export const expectedToolRetry = (seed: number) => seed * 11;

/**
 * The tool's own policy: the handler throws (outside any step) until it has started `crashes` + 1 times,
 * counted in a file of the task's own (a run killed with its worker counts as a start, not as a crash).
 */
export const wfToolRetry = defineTool({
  name: 'wf_tool_retry',
  description: 'a handler that crashes on its first runs; the tool policy retries it (workflow chaos tool)',
  inputSchema: z.object({ seed: z.number().int().min(0), crashes: z.number().int().min(0).max(5) }),
  taskSupport: 'required',
  retry: { maxAttempts: 8, backoff: { initialMs: 200, factor: 1 } },
  async handler({ seed, crashes }, ctx) {
    const first = await ctx.step('first', () => {
      logStart({ kind: 'step', task: taskIdOf(ctx), name: 'first' });
      return seed * 10;
    });
    logStart({ kind: 'handler', task: taskIdOf(ctx), name: 'wf_tool_retry' });
    const dir = logDir();
    if (dir !== undefined && dir !== '') {
      const file = path.join(dir, `runs-${taskIdOf(ctx)}`);
      appendFileSync(file, '.');
      if (readFileSync(file, 'utf8').length <= crashes) throw new Error('the handler crashes (on purpose)');
    }
    const value = await ctx.step('second', () => {
      logStart({ kind: 'step', task: taskIdOf(ctx), name: 'second' });
      return first + seed;
    });
    return { content: [{ type: 'text', text: `value ${value}` }], structuredContent: { value } };
  },
});

// ------------------------------------------------------------------------------------------------

export const nonRetryableMessage = (seed: number) => `seed ${seed} is refused for good`;

/** A step that throws NonRetryableError: the task fails at once although the tool would retry. */
export const wfNonRetryable = defineTool({
  name: 'wf_non_retryable',
  description: 'a step throws NonRetryableError (workflow chaos tool)',
  inputSchema: z.object({ seed: z.number().int().min(0) }),
  taskSupport: 'required',
  retry: { maxAttempts: 5, backoff: { initialMs: 100 } },
  async handler({ seed }, ctx) {
    await ctx.step('check', () => {
      logStart({ kind: 'step', task: taskIdOf(ctx), name: 'check' });
      throw new NonRetryableError(nonRetryableMessage(seed));
    });
    return { content: [{ type: 'text', text: 'unreachable' }] };
  },
});

// ------------------------------------------------------------------------------------------------

const MIB = 1_048_576;

/**
 * `mebibytes` MiB of incompressible bytes, the same for the same seed in every process: AES-128-CTR of
 * zeros under a key derived from the seed, a MiB at a time.
 */
export function* artifactBytes(seed: number, mebibytes: number): Generator<Buffer> {
  const key = createHash('sha256').update(`wf-artifact-${seed}`).digest().subarray(0, 16);
  const cipher = createCipheriv('aes-128-ctr', key, Buffer.alloc(16));
  const zeros = Buffer.alloc(MIB);
  for (let i = 0; i < mebibytes; i++) yield cipher.update(zeros);
}

/** The SHA-256 (hex) of wf_artifact's bytes. */
export function artifactSha256(seed: number, mebibytes: number): string {
  const hash = createHash('sha256');
  for (const chunk of artifactBytes(seed, mebibytes)) hash.update(chunk);
  return hash.digest('hex');
}

export const ARTIFACT_NAME = 'data.bin';

/** An artifact of `mebibytes` MiB generated from the seed, then a step `finish`; the result links it. */
export const wfArtifact = defineTool({
  name: 'wf_artifact',
  description: 'writes a deterministic artifact of 8–16 MiB (workflow chaos tool)',
  inputSchema: z.object({ seed: z.number().int().min(0), mebibytes: z.number().int().min(1).max(64) }),
  taskSupport: 'required',
  async handler({ seed, mebibytes }, ctx) {
    const task = taskIdOf(ctx);
    function* source(): Generator<Buffer> {
      logStart({ kind: 'artifact', task, name: `artifact:${ARTIFACT_NAME}` });
      yield* artifactBytes(seed, mebibytes);
    }
    const link = await ctx.artifact(ARTIFACT_NAME, source(), { mimeType: 'application/octet-stream' });
    const size = await ctx.step('finish', () => {
      logStart({ kind: 'step', task, name: 'finish' });
      return link.size;
    });
    return { content: [{ type: 'text', text: `wrote ${size} bytes` }, link], structuredContent: { size } };
  },
});

// ------------------------------------------------------------------------------------------------

export const expectedPause = (seed: number) => seed * 5 + 2;
/** How often wf_pause's gate may start before the task pauses (its step's own policy). */
export const GATE_ATTEMPTS = 2;

/**
 * `onExhausted: 'pause'`: the step `gate` (its own policy, GATE_ATTEMPTS) fails until the test creates
 * `gateFile(dir, seed)`; its retries run out, the task pauses, and an operator resumes it.
 */
export const wfPause = defineTool({
  name: 'wf_pause',
  description: 'pauses until a flag lets its gate through and an operator resumes it (workflow chaos tool)',
  inputSchema: z.object({ seed: z.number().int().min(0) }),
  taskSupport: 'required',
  retry: { maxAttempts: 2, backoff: { initialMs: 100 }, onExhausted: 'pause' },
  async handler({ seed }, ctx) {
    const value = await ctx.step(
      'gate',
      (_signal, { attempt }) => {
        logStart({ kind: 'step', task: taskIdOf(ctx), name: 'gate', attempt });
        const dir = logDir();
        if (dir === undefined || dir === '' || !existsSync(gateFile(dir, seed))) {
          throw new Error(`the gate of seed ${seed} is closed`);
        }
        return expectedPause(seed);
      },
      { retry: { maxAttempts: GATE_ATTEMPTS, backoff: { initialMs: 50 } } },
    );
    return { content: [{ type: 'text', text: `value ${value}` }], structuredContent: { value } };
  },
});

export const WORKFLOW_TOOLS = [
  wfSteps,
  wfSignal,
  wfMap,
  wfStepRetry,
  wfToolRetry,
  wfNonRetryable,
  wfArtifact,
  wfPause,
] as ToolDefinition[];

/** The `--tools` module's export: the shipped tools (the final burst runs analyze_numbers) and these. */
export const tools: readonly ToolDefinition[] = [...SHIPPED_TOOLS, ...WORKFLOW_TOOLS];
