import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository's `runners/` directory, bound read-only into handler containers at
 * /tern/runners. AGENT_RUNNERS_DIR overrides it; otherwise it is found relative to this file,
 * which sits four levels below the root in the sources (`apps/agent/src/code/`) and five in
 * the build (`dist/apps/agent/src/code/`). Undefined when there is none (handler starts then
 * fail with a reason).
 */
export function findRunnersDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const candidates = env.AGENT_RUNNERS_DIR
    ? [env.AGENT_RUNNERS_DIR]
    : [new URL('../../../../../runners', import.meta.url), new URL('../../../../runners', import.meta.url)].map((u) => fileURLToPath(u));
  return candidates.find((dir) => existsSync(`${dir}/python/tern_runner.py`) && existsSync(`${dir}/node/tern-runner.mjs`));
}

/** The Python SDK beside the runners (`<root>/sdk/python`), which handler containers import as `tern`; undefined when absent. */
export function findPythonSdkDir(runnersDir: string | undefined): string | undefined {
  const dir = runnersDir && join(runnersDir, '..', 'sdk', 'python');
  return dir && existsSync(join(dir, 'tern', '__init__.py')) ? dir : undefined;
}
