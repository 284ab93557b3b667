/**
 * What analyze_numbers must return, computed here independently of the tool: a plain loop over the
 * whole sequence, not chunked.
 */
export function expectedAnalysis(count: number, chunkSize: number) {
  let sum = 0;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 1; i <= count; i++) {
    const x = Number((BigInt(i) * 48271n) % 1000003n);
    sum += x;
    min = Math.min(min, x);
    max = Math.max(max, x);
  }
  return { count, sum, min, max, mean: sum / count, chunks: Math.ceil(count / chunkSize) };
}
