import { dirname, resolve } from 'node:path';
import { Command } from 'commander';
import { type DeploymentDetail, type DeployResult, isImageBuild } from '#tern/contracts';
import { secondsArgument } from '../arguments.js';
import { ApiClient, ApiError } from '../api-client.js';
import { type CliContext, resolveContext } from '../cli-config.js';
import { bytes } from '../format.js';
import { type Bundle, packFolder, readSpecFile } from './deploy-bundle.js';
import { buildSpecImage } from './image.js';

/** HEAD first, so an unchanged folder is not sent again. */
async function upload(ctx: CliContext, bundle: Bundle, log: (s: string) => void): Promise<void> {
  const url = `${ctx.gateway}/api/v1/code/${bundle.digest}`;
  const auth: Record<string, string> = ctx.token ? { authorization: `Bearer ${ctx.token}` } : {};
  const head = await fetch(url, { method: 'HEAD', headers: auth }).catch((e: Error) => {
    throw new ApiError(0, `cannot reach the gateway at ${ctx.gateway} (${e.cause ?? e.message}); is it running? (npm run up)`);
  });
  if (head.ok) return log(`Code ${bundle.digest.slice(0, 19)}… already uploaded.`);
  if (head.status !== 404) throw new ApiError(head.status, `${head.status} checking code ${bundle.digest}`);
  log(`Uploading code (${bytes(bundle.bytes.length)})…`);
  const put = await fetch(url, { method: 'PUT', headers: { ...auth, 'content-type': 'application/gzip' }, body: bundle.bytes });
  if (!put.ok) {
    const body = (await put.json().catch(() => ({}))) as { message?: string | string[] };
    throw new ApiError(put.status, `${put.status} uploading code: ${[body.message ?? put.statusText].flat().join('; ')}`);
  }
}

/** Polls until the version's min_containers run, or says that it scales from zero. */
async function waitForContainers(api: ApiClient, result: DeployResult, timeoutS: number, log: (s: string) => void): Promise<void> {
  const min = result.spec.autoscaler.minContainers;
  if (min === 0) return log('min_containers is 0: it scales from zero on the first request.');
  const deadline = Date.now() + timeoutS * 1000;
  let last = '';
  while (Date.now() < deadline) {
    const { body } = await api.get<DeploymentDetail>(`/api/v1/deployments/${result.name}`);
    const running = body.containers.filter((c) => c.version === result.version && c.state === 'running' && c.readyAt).length;
    if (running >= min) return log(`${running}/${min} containers ready.`);
    const line = `Waiting for containers: ${running}/${min} ready${body.reason ? ` (${body.reason})` : ''}`;
    if (line !== last) log((last = line));
    await new Promise((r) => setTimeout(r, 1000));
  }
  log(`Still waiting after ${timeoutS}s; follow it with: tern deployments ${result.name}`);
}

export function deployCommand(): Command {
  return new Command('deploy')
    .description("Deploy a spec (tern.yaml): uploads the spec's folder when it has a handler, then creates a new version")
    .argument('<file>', 'the spec, YAML or JSON')
    .option('--no-wait', 'do not wait for min_containers to be ready')
    .option('--timeout <seconds>', 'how long to wait for containers', secondsArgument, 120)
    .option('--json', 'print the raw JSON of the new version')
    .action(async (file: string, opts: { wait: boolean; timeout: number; json?: boolean }) => {
      const ctx = resolveContext();
      const api = new ApiClient(ctx);
      const log = (s: string) => (opts.json ? process.stderr : process.stdout).write(`${s}\n`);
      const spec = readSpecFile(file);
      // A build in the spec: built here, a layer per step (unchanged steps come from the cache), then deployed by digest.
      if (isImageBuild(spec.image)) spec.image = await buildSpecImage(file, log);
      if (spec.handler !== undefined && spec.code === undefined) {
        const bundle = await packFolder(dirname(resolve(file)));
        await upload(ctx, bundle, log);
        spec.code = bundle.digest;
      }
      const { body } = await api.request<DeployResult>('POST', '/api/v1/deployments', spec);
      if (opts.json) console.log(JSON.stringify(body, null, 2));
      else log(`Deployed ${body.name} version ${body.version}: ${body.url}`);
      if (opts.wait) await waitForContainers(api, body, opts.timeout, log);
    });
}
