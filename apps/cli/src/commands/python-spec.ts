import { existsSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';

/** `app.py:predict`: a handler declared with the Python SDK's decorators rather than a spec file. */
export interface PythonHandler {
  file: string;
  attribute: string;
}

export function pythonHandler(target: string): PythonHandler | undefined {
  const match = /^(.+\.py):([A-Za-z_]\w*)$/.exec(target);
  return match ? { file: match[1], attribute: match[2] } : undefined;
}

/**
 * The Python SDK of this installation (sdk/python), found from this file four levels below the
 * root in the sources and five in the build; it goes first on PYTHONPATH so the spec always
 * comes from the SDK that matches this CLI, installed or not.
 */
function sdkDir(): string {
  const candidates = ['../../../../sdk/python', '../../../../../sdk/python'].map((p) => fileURLToPath(new URL(p, import.meta.url)));
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
  const python = env.TERN_PYTHON ?? 'python3';
  const pythonPath = [sdkDir(), env.PYTHONPATH].filter(Boolean).join(':');
  const file = resolve(handler.file);
  const ran = await execa(python, ['-m', 'tern.spec', basename(file), handler.attribute], {
    cwd: dirname(file),
    // Reading a spec writes nothing into the user's folder (no __pycache__).
    env: { ...env, PYTHONPATH: pythonPath, PYTHONDONTWRITEBYTECODE: '1' },
    reject: false,
  });
  if (ran.failed) {
    const reason = ran.stderr.trim().split('\n').pop() || ran.shortMessage;
    throw new Error(`${handler.file}:${handler.attribute}: ${reason}`);
  }
  return JSON.parse(ran.stdout) as Record<string, unknown>;
}
