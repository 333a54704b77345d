import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { removeStateDir, tempStateDir, ternAgent } from './harness.js';

describe('tern-agent init / config show / config set', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach(removeStateDir));

  it('round-trips: init writes a private config.yaml, show masks the token, set changes one key', async () => {
    const dir = tempStateDir();
    dirs.push(dir);
    const token = 'tern_join_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG';
    const init = await ternAgent(['init', '--gateway', 'https://tern.example.com/', '--token', token, '--pool', 'gpu', '--state-dir', dir]);
    expect(init).toMatchObject({ code: 0, stdout: expect.stringContaining(`wrote ${join(dir, 'config.yaml')}`) });
    expect(statSync(join(dir, 'config.yaml')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, 'config.yaml'), 'utf8')).toContain(`gateway: https://tern.example.com\ntoken: ${token}\npool: gpu\n`);

    const show = await ternAgent(['config', 'show', '--state-dir', dir]);
    expect(show.code).toBe(0);
    expect(show.stdout).toBe(`# ${join(dir, 'config.yaml')}\ngateway: https://tern.example.com\ntoken: tern_joi…DEFG\npool: gpu\n`);
    expect(show.stdout).not.toContain(token);

    expect(await ternAgent(['config', 'set', 'machineId', 'box-7', '--state-dir', dir])).toMatchObject({ code: 0 });
    // AGENT_STATE_DIR finds the same file.
    const again = await ternAgent(['config', 'show'], { AGENT_STATE_DIR: dir });
    expect(again.stdout).toContain('machineId: box-7');
  });

  it('init --builder makes the machine a builder; config set builder takes only true or false', async () => {
    const dir = tempStateDir();
    dirs.push(dir);
    const init = await ternAgent(['init', '--gateway', 'http://127.0.0.1:1994', '--token', 't', '--builder', '--state-dir', dir]);
    expect(init.code).toBe(0);
    expect(readFileSync(join(dir, 'config.yaml'), 'utf8')).toContain('builder: "true"\n');
    const bad = await ternAgent(['config', 'set', 'builder', 'yes', '--state-dir', dir]);
    expect(bad.code).toBe(78);
    expect(bad.stderr).toContain('builder must be true or false, not "yes"');
  });

  it('refuses bad values with the reason, and exits 78', async () => {
    const dir = tempStateDir();
    dirs.push(dir);
    const badUrl = await ternAgent(['init', '--gateway', 'tern.example.com', '--token', 't', '--state-dir', dir]);
    expect(badUrl.code).toBe(78);
    expect(badUrl.stderr).toMatch(
      /gateway: "tern.example.com" is not a URL; give the gateway's address such as https:\/\/tern.example.com/,
    );
    const badScheme = await ternAgent(['init', '--gateway', 'ftp://x', '--token', 't', '--pool', 'a b', '--state-dir', dir]);
    expect(badScheme.stderr).toMatch(/must start with http:\/\/ or https:\/\//);
    expect(badScheme.stderr).toMatch(/pool "a b" must be 1-63 letters, digits, - or _/);

    const none = await ternAgent(['config', 'show', '--state-dir', dir]);
    expect(none.code).toBe(78);
    expect(none.stderr).toMatch(/no configuration at .*config.yaml: run `tern-agent init/);

    await ternAgent(['init', '--gateway', 'http://127.0.0.1:1994', '--token', 't', '--state-dir', dir]);
    const unknown = await ternAgent(['config', 'set', 'colour', 'red', '--state-dir', dir]);
    expect(unknown).toMatchObject({
      code: 78,
      stderr: expect.stringMatching(/unknown key "colour"; one of gateway, token, pool, machineId, runtime, dashboard/),
    });
    const badRuntime = await ternAgent(['config', 'set', 'runtime', 'docker', '--state-dir', dir]);
    expect(badRuntime.stderr).toMatch(/runtime must be runc or nerdctl, not "docker"/);
  });
});
