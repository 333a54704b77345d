import { existsSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';

/** `app.py:predict`: a handler declared with the Python SDK's decorators rather than a spec file. */
export interface PythonHandler {
  file: string;
  attribute: string;
}

/** `app.py:predict` names one decorated handler; `app.py` alone, every one the module declares. */
export function pythonHandler(target: string): PythonHandler | undefined {
  const match = /^(.+\.py):([A-Za-z_]\w*)$/.exec(target);
  return match ? { file: match[1], attribute: match[2] } : undefined;
}

export function pythonModule(target: string): string | undefined {
  return /^.+\.py$/.test(target) ? target : undefined;
}

/**
 * The Python SDK of this installation (sdk/python), found from this file four levels below the
 * root in the sources and five in the build, or beside the bundle of the npm package (python-sdk,
 * scripts/pack.mjs puts it there); it goes first on PYTHONPATH so the spec always comes from the
 * SDK that matches this CLI, installed or not.
 */
function sdkDir(): string {
  const candidates = ['../../../../sdk/python', '../../../../../sdk/python', './python-sdk'].map((p) =>
    fileURLToPath(new URL(p, import.meta.url)),
  );
  const found = candidates.find((dir) => existsSync(`${dir}/tern/spec.py`));
  if (!found) throw new Error(`the Python SDK is not in this installation (looked in ${candidates.join(', ')})`);
  return found;
}

/**
 * The spec the decorator declares, as `python3 -m tern.spec app.py predict` prints it, so the
 * decorator is the single source of truth. TERN_PYTHON picks the interpreter (default python3).
 * Python's own message (an import error, an option the decorator refused) is the error.
 */
export async function readPythonSpec(handler: PythonHandler, env: NodeJS.ProcessEnv = process.env): Promise<Record<string, unknown>> {
  return (await runSpecModule(handler.file, [handler.attribute], `${handler.file}:${handler.attribute}`, env)) as Record<string, unknown>;
}

/** Every handler `file` declares with a decorator, in its order: `python3 -m tern.spec app.py`. */
export async function readPythonSpecs(
  file: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ handler: string; spec: Record<string, unknown> }[]> {
  return (await runSpecModule(file, [], file, env)) as { handler: string; spec: Record<string, unknown> }[];
}

async function runSpecModule(file: string, args: string[], what: string, env: NodeJS.ProcessEnv): Promise<unknown> {
  const python = env.TERN_PYTHON ?? 'python3';
  const pythonPath = [sdkDir(), env.PYTHONPATH].filter(Boolean).join(':');
  const path = resolve(file);
  const ran = await execa(python, ['-m', 'tern.spec', basename(path), ...args], {
    cwd: dirname(path),
    // Reading a spec writes nothing into the user's folder (no __pycache__).
    env: { ...env, PYTHONPATH: pythonPath, PYTHONDONTWRITEBYTECODE: '1' },
    reject: false,
  });
  if (ran.failed) {
    const reason = ran.stderr.trim().split('\n').pop() || ran.shortMessage;
    throw new Error(`${what}: ${reason}`);
  }
  return JSON.parse(ran.stdout) as unknown;
}
