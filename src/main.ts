// The repository's process entry before the CLI existed (`src/main.ts --role=server|worker|migrate`):
// kept for scripts and deployments that name it; the same code paths as `durable-mcp-tasks <command>`.
import './node-version.ts';
import { coerceError } from './log.ts';
import { runCli } from './cli/program.ts';

const roleArg = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length);
const command = roleArg === undefined || roleArg === 'all' ? 'start' : roleArg;
const rest = process.argv.slice(2).filter((a) => !a.startsWith('--role='));
runCli([process.argv[0]!, process.argv[1]!, command, ...rest]).catch((err: unknown) => {
  process.stderr.write(`fatal: ${coerceError(err).stack ?? String(err)}\n`);
  process.exit(1);
});
