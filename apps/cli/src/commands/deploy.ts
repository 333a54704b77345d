import { dirname, resolve } from 'node:path';
import { Command } from 'commander';
import { type DeploymentDetail, type DeployResult, isImageBuild } from '#tern/contracts';
import { secondsArgument } from '../arguments.js';
import { TernClient } from '#tern/client';
import { type ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { packFolder, readSpecFile } from './deploy-bundle.js';
import { buildSpecImage, uploadFolder } from './image-build.js';
import { pythonHandler, pythonModule, readPythonSpec, readPythonSpecs } from './python-spec.js';

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

/** The specs a deploy argument names: a spec file's, one decorated handler's, or every one of a module. */
async function specsOf(file: string): Promise<Record<string, unknown>[]> {
  const python = pythonHandler(file);
  if (python) return [await readPythonSpec(python)];
  const module = pythonModule(file);
  if (module) return (await readPythonSpecs(module)).map((h) => h.spec);
  return [readSpecFile(file)];
}

export function deployCommand(): Command {
  return new Command('deploy')
    .description(
      "Deploy a spec (tern.yaml), a handler declared with the Python SDK's decorators (app.py:predict), or every decorated handler of a module (app.py): uploads the folder (the container's /app) once, then creates a new version of each",
    )
    .argument('<file>', 'the spec, YAML or JSON, app.py:<decorated handler>, or app.py')
    .option('--no-wait', 'do not wait for min_containers to be ready')
    .option('--timeout <seconds>', 'how long to wait for containers', secondsArgument, 120)
    .option('--json', 'print the raw JSON of the new version (a JSON array of them for a module)')
    .action(async (file: string, opts: { wait: boolean; timeout: number; json?: boolean }) => {
      const client = new TernClient(resolveContext());
      const log = (s: string) => (opts.json ? process.stderr : process.stdout).write(`${s}\n`);
      const specs = await specsOf(file);
      const specFile = pythonHandler(file)?.file ?? file;
      // The folder the specs speak for (the spec file's, or the Python module's) is uploaded once.
      let code: string | undefined;
      const results: DeployResult[] = [];
      for (const spec of specs) {
        // A handler and a command server alike run in /app, the spec's folder (code: in the spec names one uploaded before).
        if ((spec.handler !== undefined || spec.command !== undefined) && spec.code === undefined) {
          if (!code) {
            const bundle = await packFolder(dirname(resolve(specFile)));
            await uploadFolder(client, bundle, log);
            code = bundle.digest;
          }
          spec.code = code;
        }
        // A build in the spec: built on a builder machine, a layer per step (unchanged steps come from its cache), then deployed by digest.
        if (isImageBuild(spec.image))
          spec.image = await buildSpecImage(client, specFile, log, typeof spec.code === 'string' ? spec.code : undefined, spec);
        const body = await client.deploy(spec);
        results.push(body);
        // An endpoint's version is pinned by @<N> on its name (what follows the name is the server's path).
        if (!opts.json)
          log(
            `Deployed ${body.name} version ${body.version}: ${body.url}${body.spec.kind === 'endpoint' ? ` (this version: ${body.url}@${body.version})` : ''}`,
          );
      }
      if (opts.json) console.log(JSON.stringify(pythonModule(file) ? results : results[0], null, 2));
      if (opts.wait) for (const body of results) await waitForContainers(client.http, body, opts.timeout, log);
    });
}
