// What an operator command writes to stdout: text for people, JSON for scripts.

export const print = (text: string): void => void process.stdout.write(text);

/** `--json` output: indented, one document, a trailing newline. */
export const printJson = (value: unknown): void => print(`${JSON.stringify(value, null, 2)}\n`);
