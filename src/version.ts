import { existsSync, readFileSync } from 'node:fs';

/** This package's version, from its package.json (one level up from src/, two from dist/src/). */
function readVersion(): string {
  for (const rel of ['../package.json', '../../package.json']) {
    const file = new URL(rel, import.meta.url);
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === 'durable-mcp-tasks' && pkg.version !== undefined) return pkg.version;
  }
  return '0.0.0';
}

export const PACKAGE_VERSION = readVersion();
