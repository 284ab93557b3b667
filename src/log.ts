/** Fields that tie a log line to the request, task or job it is about. */
export interface LogScope {
  requestId?: string | number;
  taskId?: string;
  jobId?: string;
  worker?: string;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Logger {
  debug(msg: string, extra?: Record<string, unknown>): void;
  info(msg: string, extra?: Record<string, unknown>): void;
  warn(msg: string, extra?: Record<string, unknown>): void;
  error(msg: string, extra?: Record<string, unknown>): void;
  scope(scope: LogScope): Logger;
}

/** A JSON-lines logger on stderr; scopes are merged into every line. */
export function createLogger(level: LogLevel = 'info', scope: LogScope = {}): Logger {
  const min = RANK[level];
  const write = (lvl: Exclude<LogLevel, 'silent'>, msg: string, extra?: Record<string, unknown>) => {
    if (RANK[lvl] < min) return;
    process.stderr.write(
      JSON.stringify({ t: new Date().toISOString(), level: lvl, msg, ...scope, ...extra }) + '\n',
    );
  };
  return {
    debug: (m, e) => write('debug', m, e),
    info: (m, e) => write('info', m, e),
    warn: (m, e) => write('warn', m, e),
    error: (m, e) => write('error', m, e),
    scope: (s) => createLogger(level, { ...scope, ...s }),
  };
}

/** Normalizes a caught value once, so that logs and error paths see an Error. */
export function coerceError(err: unknown): Error {
  if (err instanceof Error) return err;
  return new Error(typeof err === 'string' ? err : JSON.stringify(err));
}
