/**
 * docs/configuration.md from the configuration schema itself (`src/config.ts`), so the reference
 * never drifts from the code: `npm run docs:config` writes it, `test/docs.test.ts` checks it.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describeSettings } from '../src/config.ts';

export const CONFIG_DOC = path.resolve(import.meta.dirname, '../docs/configuration.md');

export function renderConfigurationDoc(): string {
  const cell = (s: string) => s.replaceAll('|', '\\|');
  const rows = describeSettings().map(
    (s) =>
      `| \`${s.name}\` | ${s.default === undefined ? 'unset' : `\`${JSON.stringify(s.default)}\``} | ${cell(s.description)} |`,
  );
  return `# Configuration

Every setting is an environment variable (an empty value means unset). \`durable-mcp-tasks --help\` prints the
same list; \`createServer({ settings: { … } })\` takes the same names, and \`fromEnv()\` reads them from an
environment. Flags (\`--port\`, \`--host\`) win over the environment. This file is generated from
\`src/config.ts\` (\`npm run docs:config\`); a test fails when it is stale.

| variable | default | meaning |
| --- | --- | --- |
${rows.join('\n')}
`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(CONFIG_DOC, renderConfigurationDoc());
  process.stdout.write(`wrote ${CONFIG_DOC}\n`);
}
