import '../src/node-version.ts';
import { main } from '../src/main.ts';

// `npm run worker`: a worker process (no HTTP), scaled separately from the HTTP instances.
main('worker').catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
