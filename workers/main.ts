// `npm run worker`: a worker process (no HTTP), scaled separately from the HTTP instances.
// The same code path as `durable-mcp-tasks worker`.
import '../src/node-version.ts';
import { runCli } from '../src/cli/program.ts';

runCli([process.argv[0]!, process.argv[1]!, 'worker', ...process.argv.slice(2)]).catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
