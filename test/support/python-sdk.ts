import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** The Python SDK of this checkout (`import tern`), put on PYTHONPATH. */
export const PYTHON_SDK = fileURLToPath(new URL('../../sdk/python', import.meta.url));

/**
 * Calls `tern.<fn>(arg)` of the Python SDK twice against `gateway` as `token`: what the first
 * call returned, and `{ again: <status> }` from the NotFoundError the second must raise.
 */
export async function deleteTwiceInPython(
  fn: 'delete_image' | 'delete_workspace',
  arg: string,
  gateway: string,
  token: string,
): Promise<[unknown, unknown]> {
  const script = `
import json, sys, tern
print(json.dumps(tern.${fn}(sys.argv[1])))
try:
    tern.${fn}(sys.argv[1])
except tern.NotFoundError as e:
    print(json.dumps({"again": e.status}))
`;
  const { stdout } = await promisify(execFile)('python3', ['-c', script, arg], {
    env: { ...process.env, PYTHONPATH: PYTHON_SDK, TERN_GATEWAY: gateway, TERN_TOKEN: token, PYTHONDONTWRITEBYTECODE: '1' },
  });
  const [first, second] = stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as unknown);
  return [first, second];
}
