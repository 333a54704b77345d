import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { EXAMPLES } from '../support/examples.js';
import { describeNeeding } from '../support/real-parts.js';
import { startStack, type Stack } from '../support/stack.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

let stack: Stack;
/** The laptop: a folder outside the checkout, its own empty HOME, the packages and nothing else. */
let laptop: string;
let packages: string;

/**
 * What runs on the laptop sees none of the checkout: no NODE_PATH, PYTHONPATH or npm_* variables
 * (npm test sets some), HOME empty but for what the commands write, the gateway from the environment.
 */
function laptopEnv(): NodeJS.ProcessEnv {
  return {
    // npm test puts the checkout's node_modules/.bin first; a laptop has none of it.
    PATH: (process.env.PATH ?? '')
      .split(':')
      .filter((dir) => !dir.startsWith(ROOT))
      .join(':'),
    HOME: join(laptop, 'home'),
    TMPDIR: laptop,
    TERN_GATEWAY: stack.gateway,
    TERN_TOKEN: stack.token,
    NO_COLOR: '1',
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONNOUSERSITE: '1',
  };
}

async function onLaptop(cmd: string, args: string[], cwd = join(laptop, 'app')) {
  return promisify(execFile)(cmd, args, { cwd, env: laptopEnv(), maxBuffer: 16 * 2 ** 20 });
}

function packageFile(pattern: RegExp): string {
  const found = readdirSync(packages).filter((n) => pattern.test(n));
  expect(found).toHaveLength(1);
  return join(packages, found[0]);
}

(await describeNeeding(['root', 'runc', 'python3', 'ip', 'nft']))('packages on a laptop with no clone', () => {
  beforeAll(async () => {
    laptop = realpathSync(mkdtempSync(join(tmpdir(), 'tern-laptop-')));
    packages = join(laptop, 'packages');
    mkdirSync(join(laptop, 'home'));
    cpSync(join(EXAMPLES, 'python-sdk'), join(laptop, 'app'), { recursive: true });
    // npm test built dist/ already; the packages go outside the checkout.
    await promisify(execFile)(process.execPath, [join(ROOT, 'scripts', 'pack.mjs'), '--out', packages], {
      cwd: ROOT,
      env: { ...process.env, TERN_SKIP_BUILD: '1' },
    });
    stack = await startStack('packages');
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    if (laptop) rmSync(laptop, { recursive: true, force: true });
  });

  it('installs the CLI and the client from their tarballs offline, with no dependency to fetch', async () => {
    const cli = packageFile(new RegExp(`^tern-gpu-cli-${VERSION}\\.tgz$`));
    const client = packageFile(new RegExp(`^tern-gpu-client-${VERSION}\\.tgz$`));
    writeFileSync(join(laptop, 'app', 'package.json'), '{ "private": true, "type": "module" }\n');
    // --offline: nothing may come from a registry, so the CLI must carry everything it runs.
    await onLaptop('npm', ['install', '--offline', '--no-audit', '--no-fund', cli, client]);
    const installed = readdirSync(join(laptop, 'app', 'node_modules'), { recursive: true }) as string[];
    expect(installed.filter((n) => n.endsWith('package.json') && !n.includes('python-sdk')).sort()).toEqual([
      join('@tern-gpu', 'cli', 'package.json'),
      join('@tern-gpu', 'client', 'package.json'),
    ]);
    const { stdout } = await onLaptop(join(laptop, 'app', 'node_modules', '.bin', 'tern'), ['--version']);
    expect(stdout.trim()).toBe(VERSION);
  }, 120_000);

  it('deploys a Python handler with the installed `tern` and calls it, the decorators read by the SDK the package carries', async () => {
    const tern = join(laptop, 'app', 'node_modules', '.bin', 'tern');
    const deployed = await onLaptop(tern, ['deploy', 'app.py:square']);
    expect(deployed.stdout).toMatch(/^Deployed sdk-square version 1: /m);
    const ran = await onLaptop(tern, ['run', 'sdk-square', '--data', '{"n": 12}']);
    expect(JSON.parse(ran.stdout)).toEqual({ n: 12, square: 144 });
    const status = await onLaptop(tern, ['deployments']);
    expect(status.stdout).toContain('sdk-square');
  }, 300_000);

  it('calls it from the installed TypeScript client', async () => {
    const script = [
      "import { TernClient } from '@tern-gpu/client';",
      'const client = new TernClient();',
      'console.log(JSON.stringify(await client.run("sdk-square", { n: 5 })));',
    ].join('\n');
    writeFileSync(join(laptop, 'app', 'call.mjs'), script);
    const { stdout } = await onLaptop(process.execPath, ['call.mjs']);
    expect(JSON.parse(stdout)).toEqual({ n: 5, square: 25 });
  }, 120_000);

  it('pip installs the wheel into a fresh venv with no index and runs .remote() with it', async () => {
    const wheel = packageFile(new RegExp(`^tern_gpu-${VERSION}-py3-none-any\\.whl$`));
    const venv = join(laptop, 'venv');
    const python = join(venv, 'bin', 'python');
    // No pip inside (creating one is slow): this machine's pip installs into the venv, as sdk/python/tests does.
    await onLaptop('python3', ['-m', 'venv', '--without-pip', venv]);
    await onLaptop('python3', [
      '-m',
      'pip',
      '--python',
      python,
      'install',
      '--no-index',
      '--no-cache-dir',
      '--disable-pip-version-check',
      wheel,
    ]);
    const probe = [
      'import json, tern',
      'from app import square',
      'print(json.dumps({"file": tern.__file__, "version": tern.__version__, "result": square.remote(n=9)}))',
    ].join('\n');
    const got = JSON.parse((await onLaptop(python, ['-c', probe])).stdout) as { file: string; version: string; result: unknown };
    expect(got.file.startsWith(join(venv, 'lib'))).toBe(true);
    expect(got).toMatchObject({ version: VERSION, result: { n: 9, square: 81 } });
  }, 120_000);
});
