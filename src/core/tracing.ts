// OpenTelemetry through its API only: every span goes to the globally registered tracer provider, which is a
// no-op until an SDK is registered (by `startTracingFromEnv` in src/tracing-sdk.ts, or by the application
// embedding the server). W3C trace context arrives in a request's `_meta` (the 2026-07-28 spec reserves
// `traceparent`, `tracestate` and `baggage` there) or in the HTTP headers, and is stored with a task as a
// carrier, so that every run leg of the task, on any worker and after any crash, joins the same trace.
import {
  context as otelContext,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';

export type TraceContext = Context;
export { ROOT_CONTEXT, SpanKind };

/** W3C trace context as text: what `_meta`, HTTP headers and the task row carry. */
export type TraceCarrier = { traceparent?: string; tracestate?: string; baggage?: string };

const KEYS = ['traceparent', 'tracestate', 'baggage'] as const;

const tracer = () => trace.getTracer('durable-mcp-tasks');

/** The carrier in a request: `_meta` first, then the transport's headers. Values that are not strings are ignored. */
export function carrierOf(
  meta: Record<string, unknown> | undefined,
  header: (name: string) => string | undefined,
): TraceCarrier {
  const fromMeta = typeof meta?.traceparent === 'string';
  const carrier: TraceCarrier = {};
  for (const key of KEYS) {
    const value = fromMeta ? meta?.[key] : header(key);
    if (typeof value === 'string') carrier[key] = value;
  }
  return carrier;
}

/** The context a carrier describes (ROOT_CONTEXT when it carries nothing valid or no propagator is set). */
export function extractContext(carrier: TraceCarrier | null | undefined): TraceContext {
  if (carrier === null || carrier === undefined || carrier.traceparent === undefined) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** The carrier to store for `ctx`; undefined when there is no trace to continue. */
export function injectCarrier(ctx: TraceContext): TraceCarrier | undefined {
  if (!trace.getSpanContext(ctx)) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent === undefined ? undefined : carrier;
}

/** The trace id to put on log lines, when the context holds a valid span. */
export function traceIdOf(ctx: TraceContext): string | undefined {
  const sc = trace.getSpanContext(ctx);
  return sc !== undefined && trace.isSpanContextValid(sc) ? sc.traceId : undefined;
}

export interface StartedSpan {
  span: Span;
  /** The parent context with this span set: children and stored carriers start from it. */
  context: TraceContext;
}

export function startSpan(
  name: string,
  opts: { kind?: SpanKind; attributes?: Attributes },
  parent: TraceContext,
): StartedSpan {
  const span = tracer().startSpan(name, opts, parent);
  return { span, context: trace.setSpan(parent, span) };
}

/** Ends a span as failed with `errorType` (an exception's name or a JSON-RPC code), or as OK. */
export function endSpan(span: Span, error?: { type: string; message?: string }): void {
  if (error !== undefined) {
    span.setAttribute('error.type', error.type);
    span.setStatus({
      code: SpanStatusCode.ERROR,
      ...(error.message !== undefined && { message: error.message }),
    });
  }
  span.end();
}

/**
 * The context a child span starts from: the active one when it holds a span (a context manager is
 * registered and the caller is inside a span), else `fallback`.
 */
export function activeOr(fallback: TraceContext): TraceContext {
  const active = otelContext.active();
  return trace.getSpan(active) === undefined ? fallback : active;
}

/** Runs `fn` with `ctx` active, so that spans made by libraries inside (pg, fetch…) join it. */
export function withContext<T>(ctx: TraceContext, fn: () => T): T {
  return otelContext.with(ctx, fn);
}

/** A span around `fn`, ended with its outcome; `fn` runs with the span active. */
export async function inSpan<T>(
  name: string,
  opts: { kind?: SpanKind; attributes?: Attributes },
  parent: TraceContext,
  fn: (started: StartedSpan) => Promise<T>,
): Promise<T> {
  const started = startSpan(name, opts, parent);
  try {
    const value = await withContext(started.context, () => fn(started));
    endSpan(started.span);
    return value;
  } catch (err) {
    endSpan(started.span, { type: err instanceof Error ? err.name : 'Error' });
    throw err;
  }
}
