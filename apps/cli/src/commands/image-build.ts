import { dirname, resolve } from 'node:path';
import { deploymentImageProblem, type ImageBuildEvent, isImageBuild } from '#tern/contracts';
import { progressLine } from '#tern/runtime';
import { ndjsonLines, type TernClient } from '#tern/client';
import { bytes } from '../format.js';
import { type Bundle, packFolder, readSpecFile } from './deploy-bundle.js';

/** Only when the gateway lacks it, so an unchanged folder is not sent again. */
export async function uploadFolder(client: TernClient, bundle: Bundle, log: (s: string) => void): Promise<void> {
  if (await client.hasCode(bundle.digest)) return log(`Code ${bundle.digest.slice(0, 19)}… already uploaded.`);
  log(`Uploading code (${bytes(bundle.bytes.length)})…`);
  await client.uploadCode(bundle.digest, bundle.bytes);
}

/** One event of the build as the user reads it. */
function describe(e: ImageBuildEvent): string | undefined {
  switch (e.type) {
    case 'step':
      return progressLine(e);
    case 'log':
      return e.line;
    case 'built':
      return e.reused
        ? `Image unchanged: ${e.ref} (nothing to build)`
        : `Built ${e.ref} in ${e.seconds.toFixed(1)}s (${e.cachedSteps}/${e.steps} steps from the cache)`;
    case 'failed':
      return undefined;
  }
}

/**
 * Has the gateway build the spec's `image:` on a builder machine (POST /api/v1/images/builds),
 * showing its steps and log as they come, and resolves the pinned reference to deploy. `spec`:
 * the file's (or a decorated handler's); `code`: the spec's folder when already uploaded, a build
 * with `pip_wheels` uploads it otherwise.
 */
export async function buildSpecImage(
  client: TernClient,
  file: string,
  log: (line: string) => void,
  code?: string,
  spec: Record<string, unknown> = readSpecFile(file),
): Promise<string> {
  const problem = deploymentImageProblem(spec.image);
  if (problem) throw new Error(problem);
  if (!isImageBuild(spec.image)) throw new Error(`${file} names an image (${String(spec.image)}) rather than a build: nothing to build`);
  if (spec.image.pip_wheels && !code) {
    const bundle = await packFolder(dirname(resolve(file)));
    await uploadFolder(client, bundle, log);
    code = bundle.digest;
  }
  const name = typeof spec.name === 'string' && /^[a-z0-9][a-z0-9-]{0,62}$/.test(spec.name) ? spec.name : undefined;
  const response = await client.http.stream('POST', '/api/v1/images/builds', {
    image: spec.image,
    ...(name ? { name } : {}),
    ...(code && spec.image.pip_wheels ? { code } : {}),
  });
  for await (const event of ndjsonLines<ImageBuildEvent>(response)) {
    const text = describe(event);
    if (text !== undefined) log(text);
    if (event.type === 'failed') throw new Error(`the image build failed${event.step ? ` at step ${event.step}` : ''}: ${event.message}`);
    if (event.type === 'built') return event.ref;
  }
  throw new Error('the gateway ended the build without a result; run it again (finished steps are cached)');
}
