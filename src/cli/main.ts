#!/usr/bin/env node
// `durable-mcp-tasks`: the package's bin. The Node check comes first, before anything else can fail obscurely.
import '../node-version.ts';
import { coerceError } from '../log.ts';
import { runCli } from './program.ts';

runCli().catch((err: unknown) => {
  process.stderr.write(`durable-mcp-tasks: ${coerceError(err).message}\n`);
  process.exit(1);
});
