import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';

describe('loadConfig', () => {
  it('has defaults for everything: 127.0.0.1:3000 and an embedded Postgres', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({ HOST: '127.0.0.1', PORT: 3000, PRINCIPAL: 'local' });
    expect(config.DATABASE_URL).toBeUndefined();
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('treats empty variables as unset and coerces numbers', () => {
    const config = loadConfig({ REQUEST_STATE_SECRET: '', PORT: '8080' });
    expect(config.REQUEST_STATE_SECRET).toBeUndefined();
    expect(config.PORT).toBe(8080);
  });

  it('rejects invalid settings with a readable message', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/Invalid configuration[\s\S]*PORT/);
    expect(() => loadConfig({ REQUEST_STATE_SECRET: 'short' })).toThrow(/REQUEST_STATE_SECRET/);
    expect(() => loadConfig({ DATABASE_URL: 'not-a-url' })).toThrow(/DATABASE_URL[\s\S]*not a Postgres URL/);
    expect(() => loadConfig({ DATABASE_DIRECT_URL: 'mysql://x/y' })).toThrow(/DATABASE_DIRECT_URL/);
    expect(loadConfig({ DATABASE_URL: 'postgresql://u@db.example:5432/app' }).DATABASE_URL).toBe(
      'postgresql://u@db.example:5432/app',
    );
  });
});
