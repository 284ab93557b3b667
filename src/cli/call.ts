import type { Command } from 'commander';

/** Placeholder: `call` is being written. */
export function addCallCommand(program: Command): void {
  program.command('call <tool>').description('run a tool as a task (not yet implemented)');
}
