import type { Logger } from '../log.ts';
import type { TaskTraits } from '../tasks/store/create.ts';
import type { TraceContext } from '../core/tracing.ts';
import type { Notification } from '../core/wire.ts';
import type { JsonObject, RequestId, RequestMeta } from '../core/wire.ts';

/** Everything a method handler gets for one request. */
export interface RequestContext {
  id: RequestId;
  method: string;
  params: JsonObject;
  meta: RequestMeta;
  principal: string;
  /** Aborts when the client goes away (for a streamed response: closes the SSE stream). */
  signal: AbortSignal;
  /** Present when the response is an SSE stream: sends a request-scoped notification before the result. */
  notify?: ((notification: Notification) => Promise<void>) | undefined;
  /** Set by a transport whose tasks behave differently: stored with a task this request creates. */
  taskTraits?: TaskTraits | undefined;
  /** Span attributes the transport adds (e.g. its session), over the dispatcher's own. */
  spanAttributes?: Readonly<Record<string, string>> | undefined;
  /**
   * Ends the response stream early where the transport can resume it (SSE polling with Last-Event-ID);
   * absent where it cannot, and then `ctx.closeStream()` in a tool does nothing.
   */
  closeStream?: (() => void) | undefined;
  log: Logger;
  /** The request's span (set by the dispatcher): a task created here stores it, so its runs join the trace. */
  trace?: TraceContext | undefined;
  /** A request header by (case-insensitive) name. */
  header: (name: string) => string | undefined;
  /**
   * Checks the headers that mirror a tool's arguments, where the revision has them (2026-07-28's
   * `Mcp-Param-*`, for properties annotated `x-mcp-header`): tools/call calls it once it knows the tool.
   */
  checkArgumentHeaders?: ((inputSchema: JsonObject, args: JsonObject) => void) | undefined;
}

/** A method's result, before the dispatcher adds `_meta.serverInfo`. */
export type MethodResult = JsonObject & { resultType: string };

export type MethodHandler = (ctx: RequestContext) => Promise<MethodResult>;
