// Byte counts as people read them, one format for every operator surface (the CLI, the dashboard).

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'] as const;

/** A byte count in binary units, one decimal from KiB up: `512 B`, `1.5 KiB`, `200.0 MiB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  // (1,048,575 bytes is 1023.999 KiB, which one decimal would show as 1024.0 KiB.)
  if (value.toFixed(1) === '1024.0' && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${UNITS[unit]}`;
}
