import pino, { type Logger as PinoLogger } from 'pino';

/** Fields that tie a log line to the request, task or job it is about. */
export interface LogScope {
  requestId?: string | number;
  method?: string;
  taskId?: string;
  tool?: string;
  attempt?: number;
  jobId?: string;
  worker?: string;
  traceId?: string;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
/** `json` lines; `pretty` (pino-pretty, for a terminal); `auto`: pretty when stderr is a terminal. */
export type LogFormat = 'json' | 'pretty' | 'auto';

export interface Logger {
  debug(msg: string, extra?: Record<string, unknown>): void;
  info(msg: string, extra?: Record<string, unknown>): void;
  warn(msg: string, extra?: Record<string, unknown>): void;
  error(msg: string, extra?: Record<string, unknown>): void;
  scope(scope: LogScope): Logger;
}

/**
 * Never written, wherever they appear in a line: credentials, the answers a user gave a task (they may
 * hold anything), sealed request state.
 */
export const REDACTED_PATHS = [
  'authorization',
  'token',
  'password',
  'secret',
  'inputResponses',
  'requestState',
  'headers.authorization',
  '*.authorization',
  '*.token',
  '*.password',
  '*.secret',
  '*.inputResponses',
  '*.requestState',
  '*.headers.authorization',
];

export interface LoggerOptions {
  format?: LogFormat;
  /**
   * Where JSON lines go (default: stderr, written synchronously so that a crash loses nothing). A plain
   * structural type: the package's public declarations must not need pino's (or Node's) types.
   */
  destination?: { write(line: string): unknown };
}

function pinoFor(level: LogLevel, { format = 'json', destination }: LoggerOptions): PinoLogger {
  const pretty =
    format === 'pretty' || (format === 'auto' && process.stderr.isTTY && destination === undefined);
  const options = {
    level,
    base: undefined,
    messageKey: 'msg',
    timestamp: () => `,"t":"${new Date().toISOString()}"`,
    formatters: { level: (label: string) => ({ level: label }) },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
  };
  if (pretty) {
    return pino({
      ...options,
      transport: {
        target: 'pino-pretty',
        options: {
          destination: 2,
          colorize: process.stderr.isTTY,
          messageKey: 'msg',
          timestampKey: 't',
          translateTime: 'SYS:HH:MM:ss.l',
        },
      },
    });
  }
  return pino(options, destination ?? pino.destination({ dest: 2, sync: true }));
}

function wrap(p: PinoLogger): Logger {
  // The message goes first in the object, so a line reads {"level","t",<scope>,"msg",<extra>}.
  const at = (lvl: 'debug' | 'info' | 'warn' | 'error') => (msg: string, extra?: Record<string, unknown>) =>
    p[lvl]({ msg, ...extra });
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    // The child is made when the scope first logs: pino serializes (and redacts) a child's bindings at
    // creation, and most requests' scopes never log a line.
    scope: (s) => lazy(() => wrap(p.child(s))),
  };
}

function lazy(make: () => Logger): Logger {
  let made: Logger | undefined;
  const get = () => (made ??= make());
  return {
    debug: (msg, extra) => get().debug(msg, extra),
    info: (msg, extra) => get().info(msg, extra),
    warn: (msg, extra) => get().warn(msg, extra),
    error: (msg, extra) => get().error(msg, extra),
    scope: (s) => lazy(() => get().scope(s)),
  };
}

/** A JSON-lines logger on stderr (pino); scopes are merged into every line. */
export function createLogger(
  level: LogLevel = 'info',
  scope: LogScope = {},
  opts: LoggerOptions = {},
): Logger {
  const root = pinoFor(level, opts);
  return wrap(Object.keys(scope).length === 0 ? root : root.child(scope));
}

/** Normalizes a caught value once, so that logs and error paths see an Error. */
export function coerceError(err: unknown): Error {
  if (err instanceof Error) return err;
  return new Error(typeof err === 'string' ? err : JSON.stringify(err));
}
