// The OpenTelemetry SDK for the CLI's processes, configured by the standard OTEL_* environment variables.
// Loaded only when an exporter is configured; otherwise spans stay no-ops and none of this is imported.
// An application that embeds createServer sets up its own SDK instead: the server only uses the API.
import type * as SdkModule from '@opentelemetry/sdk-trace';
import type { Logger } from './log.ts';

export interface TracingHandle {
  /** Exports what is buffered and stops; call at shutdown, after the last span has ended. */
  shutdown(): Promise<void>;
}

/** The exporter the environment asks for, or undefined when tracing stays off. */
export function tracesExporterFromEnv(env: NodeJS.ProcessEnv): 'otlp' | 'console' | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const named = env.OTEL_TRACES_EXPORTER?.split(',').map((s) => s.trim().toLowerCase()) ?? [];
  if (named.includes('none')) return undefined;
  if (named.includes('console')) return 'console';
  if (named.includes('otlp')) return 'otlp';
  // The OTLP exporter is the specification's default; an endpoint is what says the operator wants one.
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  return endpoint !== undefined && endpoint !== '' ? 'otlp' : undefined;
}

/**
 * Registers a tracer provider, the W3C trace-context and baggage propagators and an AsyncLocalStorage
 * context manager, when `tracesExporterFromEnv` names an exporter. Reads OTEL_SERVICE_NAME and
 * OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_SCHEDULE_DELAY and OTEL_BSP_MAX_EXPORT_BATCH_SIZE;
 * the OTLP/HTTP exporter reads its own OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout, compression).
 */
export async function startTracingFromEnv(
  env: NodeJS.ProcessEnv,
  log: Logger,
  defaults: { serviceName: string; serviceVersion: string; role: string },
): Promise<TracingHandle | undefined> {
  const kind = tracesExporterFromEnv(env);
  if (kind === undefined) return undefined;
  const [api, sdk, core, resources, hooks] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/core'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/context-async-hooks'),
  ]);
  const exporter =
    kind === 'console'
      ? new sdk.ConsoleSpanExporter()
      : new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
  const resource = resources
    .resourceFromAttributes({
      'service.name': defaults.serviceName,
      'service.version': defaults.serviceVersion,
      'durable_mcp.role': defaults.role,
    })
    .merge(resources.detectResources({ detectors: [resources.envDetector, resources.processDetector] }));
  const provider = new sdk.TracerProvider({
    resource,
    sampler: samplerFromEnv(env, sdk),
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter,
        scheduledDelayMillis: positiveInt(env.OTEL_BSP_SCHEDULE_DELAY) ?? 5000,
        maxExportBatchSize: positiveInt(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE) ?? 512,
      }),
    ],
  });
  const contextManager = new hooks.AsyncLocalStorageContextManager().enable();
  api.context.setGlobalContextManager(contextManager);
  api.propagation.setGlobalPropagator(
    new core.CompositePropagator({
      propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()],
    }),
  );
  api.trace.setGlobalTracerProvider(provider);
  log.info('tracing on', { exporter: kind, sampler: env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on' });
  return {
    async shutdown() {
      await provider
        .shutdown()
        .catch((err: unknown) => log.warn('tracing shutdown failed', { error: String(err) }));
      api.trace.disable();
      api.propagation.disable();
      api.context.disable();
    },
  };
}

function positiveInt(value: string | undefined): number | undefined {
  const n = Number(value);
  return value !== undefined && Number.isInteger(n) && n > 0 ? n : undefined;
}

/** OTEL_TRACES_SAMPLER as the specification names them; parentbased_always_on by default. */
function samplerFromEnv(env: NodeJS.ProcessEnv, sdk: typeof SdkModule) {
  const arg = Number(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = Number.isFinite(arg) && arg >= 0 && arg <= 1 ? arg : 1;
  switch (env.OTEL_TRACES_SAMPLER?.trim().toLowerCase()) {
    case 'always_on':
      return new sdk.AlwaysOnSampler();
    case 'always_off':
      return new sdk.AlwaysOffSampler();
    case 'traceidratio':
      return new sdk.TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(ratio) });
    default:
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
  }
}
