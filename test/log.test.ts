// The pino logger: the JSON-lines shape, levels, scopes (request and task child loggers), redaction, and
// pino-pretty for a terminal.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../src/log.ts';

function capture(): {
  stream: Writable & { write(chunk: string): boolean };
  lines: () => Record<string, unknown>[];
} {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  return {
    stream: stream,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('the logger', () => {
  it('writes one JSON object per line: level, t, the scope, msg, then the fields', () => {
    const out = capture();
    const log = createLogger('info', {}, { destination: out.stream });
    log.info('listening', { url: 'http://127.0.0.1:3000/mcp' });
    log.scope({ taskId: 'T1', tool: 'build_report', attempt: 2 }).warn('handler crashed', { error: 'boom' });
    log.debug('not at info');
    const [first, second, ...rest] = out.lines();
    expect(rest).toEqual([]);
    expect(Object.keys(first!)).toEqual(['level', 't', 'msg', 'url']);
    expect(first).toMatchObject({ level: 'info', msg: 'listening', url: 'http://127.0.0.1:3000/mcp' });
    expect(Number.isNaN(Date.parse(first!.t as string))).toBe(false);
    expect(second).toEqual({
      level: 'warn',
      t: second!.t,
      taskId: 'T1',
      tool: 'build_report',
      attempt: 2,
      msg: 'handler crashed',
      error: 'boom',
    });
  });

  it('never writes credentials, answers or sealed state, at any depth', () => {
    const out = capture();
    const log = createLogger('debug', {}, { destination: out.stream });
    log.info('request', {
      headers: { authorization: 'Bearer secret-1' },
      token: 'secret-2',
      params: {
        inputResponses: { confirm: { content: { password: 'secret-3' } } },
        requestState: 'secret-4',
      },
      inputResponses: { k: 'secret-5' },
    });
    const text = JSON.stringify(out.lines());
    for (const secret of ['secret-1', 'secret-2', 'secret-3', 'secret-4', 'secret-5'])
      expect(text).not.toContain(secret);
    expect(text).toContain('[redacted]');
  });

  it('silent writes nothing; pretty prints for people', () => {
    const out = capture();
    createLogger('silent', {}, { destination: out.stream }).error('nothing');
    expect(out.lines()).toEqual([]);
    const root = path.resolve(import.meta.dirname, '..');
    const { stderr } = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        "import { createLogger } from './src/log.ts'; createLogger('info', {}, { format: 'pretty' }).info('hello there', { taskId: 'T9' });",
      ],
      {
        cwd: root,
        encoding: 'utf8',
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, FORCE_COLOR: '0' },
      },
    );
    expect(stderr).toMatch(/INFO.*hello there/);
    expect(stderr).toContain('taskId: "T9"');
    expect(() => JSON.parse(stderr)).toThrow();
  });
});
