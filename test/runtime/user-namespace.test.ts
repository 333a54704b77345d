import { chmod, mkdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describeNeeding } from '../support/real-parts.js';
import { collectLogs, containerId, RuntimeSandbox } from './support.js';

const HOST_ID = 300_000;

(await describeNeeding(['root', 'runc']))('RuncRuntime with a user namespace (container root is host uid 300000)', () => {
  let sandbox: RuntimeSandbox;

  beforeAll(async () => {
    sandbox = await RuntimeSandbox.create({ userNamespace: { hostId: HOST_ID, size: 65_536 } });
    // The mapped root must be able to walk to the image's rootfs (mkdtemp makes 0700 dirs).
    await chmod(sandbox.dir, 0o711);
  });

  afterAll(async () => {
    await sandbox?.destroy();
  });

  it('runs as root inside, an unprivileged host user outside: writes its volume as that user, cannot read root-only host files', async () => {
    const secretDir = join(sandbox.dir, 'host-secret');
    await mkdir(secretDir, { recursive: true });
    await writeFile(join(secretDir, 'key'), 'host root only');
    await chmod(join(secretDir, 'key'), 0o600);
    const id = containerId('userns');
    const program = `
      const fs = require('fs');
      console.log('uid=' + process.getuid() + ' map=' + fs.readFileSync('/proc/self/uid_map', 'utf8').trim().split(/\\s+/).join(','));
      fs.writeFileSync('/data/out.txt', 'from the container');
      try { fs.readFileSync('/secret/key'); console.log('secret=read'); } catch (e) { console.log('secret=' + e.code); }
      try { fs.readdirSync('/sys/class'); console.log('sys=ok'); } catch (e) { console.log('sys=' + e.code); }
    `;
    await sandbox.runtime.start({
      id,
      image: 'host',
      user: { uid: 0, gid: 0 },
      args: ['node', '-e', program],
      volumes: [{ name: 'ns/data', containerPath: '/data' }],
      binds: [{ hostPath: secretDir, containerPath: '/secret' }],
    });
    const lines = (await collectLogs(sandbox.runtime, id)).map((l) => `${l.stream}:${l.line}`);
    expect(lines).toEqual([`stdout:uid=0 map=0,${HOST_ID},65536`, 'stdout:secret=EACCES', 'stdout:sys=ok']);
    expect(await sandbox.runtime.wait(id)).toMatchObject({ exitCode: 0 });
    const written = await stat(join(sandbox.volumeRoot, 'ns', 'data', 'out.txt'));
    expect([written.uid, written.gid]).toEqual([HOST_ID, HOST_ID]);
  });

  it('serves on the host network as nobody, reachable at its port', async () => {
    const id = containerId('userns-http');
    const server = `require('http').createServer((q, s) => s.end('uid=' + process.getuid())).listen(Number(process.env.PORT), '127.0.0.1')`;
    const started = await sandbox.runtime.start({ id, image: 'host', args: ['node', '-e', server] });
    let body = '';
    for (let i = 0; i < 100 && !body; i++) {
      body = await fetch(`http://127.0.0.1:${started.port}/`).then(
        (r) => r.text(),
        () => '',
      );
      if (!body) await new Promise((r) => setTimeout(r, 100));
    }
    expect(body).toBe('uid=65534');
    await sandbox.runtime.stop(id, 2000);
  });

  it('is on here: the host allows it', async () => {
    expect(await sandbox.runtime.userNamespace()).toEqual({ hostId: HOST_ID, size: 65_536 });
  });
});

(await describeNeeding(['root', 'runc']))('RuncRuntime where a user namespace is refused', () => {
  it('runs without one and logs why: an image store the mapped root cannot reach', async () => {
    const warnings: string[] = [];
    const logger = {
      info: () => undefined,
      warn: (_o: object, msg?: string) => void warnings.push(msg ?? ''),
      error: () => undefined,
      debug: () => undefined,
    };
    const sandbox = await RuntimeSandbox.create({ userNamespace: { hostId: HOST_ID, size: 65_536 }, logger });
    try {
      // mkdtemp's 0700: the mapped root could not walk to the rootfs.
      const id = containerId('userns-off');
      await sandbox.runtime.start({
        id,
        image: 'host',
        args: ['node', '-e', 'console.log(require("fs").readFileSync("/proc/self/uid_map", "utf8").trim().split(/\\s+/).join(","))'],
      });
      expect((await collectLogs(sandbox.runtime, id)).map((l) => l.line)).toEqual(['0,0,4294967295']);
      expect(await sandbox.runtime.userNamespace()).toBeUndefined();
      expect(warnings).toEqual([
        expect.stringMatching(/^containers run without a user namespace: .*tern-rt-.* is not searchable by other users/),
      ]);
    } finally {
      await sandbox.destroy();
    }
  });
});
