/** What a leg's end means for its task: classify() and completion() are pure, so each case is one line. */
import { describe, expect, it } from 'vitest';
import { ProtocolError, ProtocolErrorCode } from '../../src/core/errors.ts';
import { LeaseLostError } from '../../src/tasks/store/lease.ts';
import { HandBack, InfrastructureError, Park, SuspendForInput } from '../../src/worker/leg-stops.ts';
import { NonRetryableError, resolveRetry, StepFailedError } from '../../src/tools/retry.ts';
import { CancelRequestedError, classify, completion } from '../../src/worker/outcome.ts';
import type * as ErrorsModule from '../../src/core/errors.ts';
import type * as RetryModule from '../../src/tools/retry.ts';

/** The server's defaults: 2 retries, 1 s apart. */
const defaults = { maxAttempts: 3, initialMs: 1_000, factor: 1, maxMs: Number.POSITIVE_INFINITY };
const retry = resolveRetry(undefined, defaults);
const firstTry = { failures: 0, retry };

describe('classify', () => {
  it('names each way a handler stops', () => {
    expect(classify(new SuspendForInput('t'), undefined, firstTry).kind).toBe('input_required');
    expect(classify(new Error('x'), new LeaseLostError('t', 1), firstTry).kind).toBe('lease_lost');
    expect(classify(new Error('aborted'), new CancelRequestedError(), firstTry).kind).toBe('cancelled');
    expect(classify(new HandBack(), undefined, firstTry).kind).toBe('handed_back');
    expect(classify(new InfrastructureError('db gone'), undefined, firstTry).kind).toBe(
      'infrastructure_retry',
    );
    const until = new Date(Date.now() + 60_000);
    expect(classify(new Park(until, 'Sleeping'), undefined, firstTry)).toEqual({
      kind: 'parked',
      until,
      statusMessage: 'Sleeping',
    });
  });

  it("fails at once on the tool's own ProtocolError, with its message", () => {
    const outcome = classify(
      new ProtocolError(ProtocolErrorCode.InvalidParams, 'bad date'),
      undefined,
      firstTry,
    );
    expect(outcome).toMatchObject({ kind: 'failed', statusMessage: 'Tool execution failed: bad date' });
  });

  it('retries a crash while retries remain, then fails with the count', () => {
    expect(classify(new Error('boom'), undefined, { failures: 1, retry })).toMatchObject({
      kind: 'crash_retry',
      delayMs: 1_000,
    });
    expect(classify('thrown string', undefined, { failures: 2, retry })).toMatchObject({
      kind: 'failed',
      statusMessage: 'Tool execution failed: internal error after 3 attempts',
      crash: { message: 'thrown string' },
    });
  });
});

describe("a tool's retry policy", () => {
  const policy = resolveRetry(
    {
      maxAttempts: 5,
      backoff: { initialMs: 100, factor: 3, maxMs: 1_000 },
      retryIf: (e) => e.message !== 'bad input',
    },
    defaults,
  );

  it('backs off exponentially up to its maximum', () => {
    const delays = [0, 1, 2, 3].map(
      (failures) =>
        (classify(new Error('flaky'), undefined, { failures, retry: policy }) as { delayMs: number }).delayMs,
    );
    expect(delays).toEqual([100, 300, 900, 1_000]);
    expect(classify(new Error('flaky'), undefined, { failures: 4, retry: policy })).toMatchObject({
      kind: 'failed',
      statusMessage: 'Tool execution failed: internal error after 5 attempts',
    });
  });

  it('does not retry what retryIf refuses, nor a NonRetryableError (failed with its message)', () => {
    expect(classify(new Error('bad input'), undefined, { failures: 0, retry: policy })).toMatchObject({
      kind: 'failed',
      statusMessage: 'Tool execution failed: internal error (not retried)',
    });
    expect(
      classify(new NonRetryableError('account closed'), undefined, { failures: 0, retry: policy }),
    ).toMatchObject({
      kind: 'failed',
      error: { message: 'account closed' },
      statusMessage: 'Tool execution failed: account closed',
    });
  });
});

describe("classify with onExhausted: 'pause'", () => {
  const pausing = resolveRetry({ maxAttempts: 2, onExhausted: 'pause' }, defaults);

  it('pauses when the last attempt crashes, saying why without the exception', () => {
    expect(classify(new Error('ECONNREFUSED'), undefined, { failures: 0, retry: pausing }).kind).toBe(
      'crash_retry',
    );
    const outcome = classify(new Error('ECONNREFUSED'), undefined, { failures: 1, retry: pausing });
    expect(outcome).toMatchObject({
      kind: 'paused',
      statusMessage: 'Paused: failed after 2 attempts; waiting for an operator to resume it',
      crash: { message: 'ECONNREFUSED' },
    });
  });

  it("pauses when a step's own retries run out", () => {
    const failed = new StepFailedError('fetch', 3, new Error('503'));
    expect(classify(failed, undefined, { failures: 0, retry: pausing })).toMatchObject({
      kind: 'paused',
      statusMessage: 'Paused: step "fetch" failed after 3 attempts; waiting for an operator to resume it',
    });
    expect(classify(failed, undefined, firstTry).kind).toBe('failed');
  });

  it('still fails what the tool says is not retried', () => {
    const noRetry = { failures: 0, retry: resolveRetry({ ...pausing, retryIf: () => false }, defaults) };
    expect(classify(new Error('bad input'), undefined, noRetry).kind).toBe('failed');
    expect(classify(new Error('bad input'), undefined, { ...noRetry, failures: 1 }).kind).toBe('failed');
    expect(classify(new NonRetryableError('closed'), undefined, { failures: 0, retry: pausing }).kind).toBe(
      'failed',
    );
    const protocol = new ProtocolError(ProtocolErrorCode.InvalidParams, 'bad date');
    expect(classify(protocol, undefined, { failures: 1, retry: pausing }).kind).toBe('failed');
  });
});

describe('completion', () => {
  it('completes a storable result within the limit', () => {
    expect(completion({ content: [] }, 'done', 1_000)).toEqual({
      kind: 'completed',
      result: { content: [] },
      statusMessage: 'done',
    });
  });

  it('fails a result over the limit, or one Postgres cannot store', () => {
    const big = { content: [{ type: 'text' as const, text: 'x'.repeat(2_000) }] };
    expect(completion(big, undefined, 1_000)).toMatchObject({
      kind: 'failed',
      statusMessage: 'Tool execution failed: result too large',
    });
    const nul = { content: [{ type: 'text' as const, text: 'a\u0000b' }] };
    expect(completion(nul, undefined, undefined)).toMatchObject({
      kind: 'failed',
      statusMessage: 'Tool execution failed: result not storable',
    });
  });
});

describe('errors from another copy of the package', () => {
  // A tools module that resolved another copy (src beside dist, two installs) throws that copy's classes:
  // loaded again under another URL, they are classes this copy's `instanceof` never saw.
  const loadAgain = (file: string): Promise<unknown> =>
    import(new URL(`../../src/${file}?another-copy`, import.meta.url).href);
  const anotherCopy = async () => ({
    ...((await loadAgain('tools/retry.ts')) as typeof RetryModule),
    ...((await loadAgain('core/errors.ts')) as typeof ErrorsModule),
  });

  it('are other classes (the premise of the cases below)', async () => {
    const copy = await anotherCopy();
    expect(copy.NonRetryableError).not.toBe(NonRetryableError);
    expect(Object.getPrototypeOf(new copy.NonRetryableError('x'))).not.toBe(NonRetryableError.prototype);
  });

  it("fail at once on another copy's NonRetryableError", async () => {
    const { NonRetryableError: Other } = await anotherCopy();
    const outcome = classify(new Other('bad input file'), undefined, firstTry);
    expect(outcome).toMatchObject({ kind: 'failed', statusMessage: 'Tool execution failed: bad input file' });
    expect(new Other('x')).toBeInstanceOf(NonRetryableError);
  });

  it("fail with another copy's ProtocolError as it says", async () => {
    const copy = await anotherCopy();
    const outcome = classify(new copy.ProtocolError(-32602, 'bad date'), undefined, firstTry);
    expect(outcome).toMatchObject({ kind: 'failed', error: { code: -32602, message: 'bad date' } });
  });

  it('keep subclasses apart: a NonRetryableError is no StepFailedError', async () => {
    const { NonRetryableError: Other } = await anotherCopy();
    expect(new Other('x')).not.toBeInstanceOf(StepFailedError);
    expect(new NonRetryableError('x')).not.toBeInstanceOf(StepFailedError);
    expect(new StepFailedError('s', 2, new Error('x'))).toBeInstanceOf(NonRetryableError);
    expect(new Error('x')).not.toBeInstanceOf(NonRetryableError);
  });
});
