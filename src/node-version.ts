/**
 * Imported first by every entry point: on a Node older than the project needs, one clear line and exit
 * 1, before anything else loads and fails with an obscure error (a migration's `.ts` extension, pg-boss).
 */
const REQUIRED = [22, 12] as const;

export function nodeVersionProblem(
  version: string = process.versions.node,
  installed: boolean = import.meta.url.includes('/dist/'),
): string | undefined {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (major > REQUIRED[0] || (major === REQUIRED[0] && minor >= REQUIRED[1])) return undefined;
  // npx -y node@24 fetches Node 24 from the npm registry for one command, with nothing installed.
  const run = installed
    ? '`npx -y node@24 node_modules/.bin/durable-mcp-tasks start`'
    : '`npx -y node@24 --import tsx src/cli/main.ts start`';
  return `durable-mcp-tasks needs Node >= ${REQUIRED.join('.')}; this is ${version}. Get one with \`nvm install 24\`, or run through npm: ${run}.`;
}

const problem = nodeVersionProblem();
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
