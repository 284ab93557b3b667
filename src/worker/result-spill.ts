// A tool result larger than MAX_RESULT_BYTES is not refused: its JSON moves to the task's artifact
// `tool-result.json`, and the result stored (and sent at both protocol revisions) is a text line and a
// resource_link to it, with the structuredContent when that alone still fits.
import { DOWNLOAD_URL_META, SPILLED_RESULT_NAME, type ArtifactLink } from '../core/artifacts.ts';
import { isStorable, jsonBytes } from '../core/limits.ts';
import type { CallToolResult } from '../core/wire.ts';
import type { StepHistory } from '../tasks/store/steps.ts';
import { artifactStepName, writeArtifact, type ArtifactWriterOptions } from './attempt-artifacts.ts';

export interface SpillOptions extends Omit<ArtifactWriterOptions, 'recorded'> {
  /** The task's recorded steps: an earlier attempt that spilled the result already recorded its link. */
  history: StepHistory;
  maxResultBytes: number | undefined;
}

/** The result to store: `result` itself when it fits, else the link to its spilled JSON. */
export async function spillOversizedResult(
  opts: SpillOptions,
  result: CallToolResult,
): Promise<CallToolResult> {
  const max = opts.maxResultBytes;
  // (A result Postgres cannot store fails its task as before: see completion().)
  if (max === undefined || !isStorable(result)) return result;
  const json = JSON.stringify(result);
  const size = Buffer.byteLength(json, 'utf8');
  if (size <= max) return result;
  const step = artifactStepName(SPILLED_RESULT_NAME);
  const link =
    (opts.history.values.get(step) as ArtifactLink | undefined) ??
    (await writeArtifact(opts, {
      name: SPILLED_RESULT_NAME,
      mimeType: 'application/json',
      source: json,
      position: null,
    }));
  return linkedResult(result, link, size, max);
}

function linkedResult(result: CallToolResult, link: ArtifactLink, size: number, max: number): CallToolResult {
  const downloadUrl = link._meta[DOWNLOAD_URL_META];
  const text =
    `The result (${size} bytes) is larger than the server stores inline (MAX_RESULT_BYTES, ${max}): ` +
    `it is the artifact ${link.uri} (application/json). Read it with resources/read, or download it from ${downloadUrl}.`;
  const linked: CallToolResult = {
    content: [{ type: 'text', text }, link],
    ...(result.isError === true && { isError: true }),
  };
  if (result.structuredContent === undefined) return linked;
  const withStructured = { ...linked, structuredContent: result.structuredContent };
  return jsonBytes(withStructured) <= max ? withStructured : linked;
}
