#!/usr/bin/env node
// `durable-mcp-tasks`: the package's bin. The Node check comes first, before anything else can fail obscurely.
import '../node-version.ts';
import { coerceError } from '../log.ts';
import { runCli } from './program.ts';

// A reader that goes away (`durable-mcp-tasks tasks show … | head`) ends the output, not with a stack.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  process.stderr.write(`durable-mcp-tasks: cannot write the output: ${err.message}\n`);
  process.exit(1);
});

runCli().catch((err: unknown) => {
  process.stderr.write(`durable-mcp-tasks: ${coerceError(err).message}\n`);
  process.exit(1);
});
