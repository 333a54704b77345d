import { existsSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { InternetHost } from './internet-host.js';
import { describeNeeding } from './real-parts.js';

const describeWithNetns = await describeNeeding(['root', 'ip']);

describeWithNetns('test internet hosts', () => {
  // Every 203.0.113.(4n+2) but two held, as hosts of other tests would hold them: the two new
  // hosts must take those two, one each (hosts sharing a /30 would both be routed to the first).
  it('stand each in a /30 no other host holds', async () => {
    const addresses = Array.from({ length: 64 }, (_, n) => `203.0.113.${4 * n + 2}`);
    const lockOf = (a: string) => `/run/tern-test-host-${a}.lock`;
    const free = addresses.filter((a) => !existsSync(lockOf(a))).slice(-2);
    // Ours are the locks this test made; one a host of a test running beside it holds stays.
    const locks: string[] = [];
    for (const a of addresses.filter((a) => !free.includes(a)))
      await writeFile(lockOf(a), `${process.pid} tern-inet-none tinoneh`, { flag: 'wx' }).then(
        () => locks.push(lockOf(a)),
        (e: NodeJS.ErrnoException) => {
          if (e.code !== 'EEXIST') throw e;
        },
      );
    const hosts: InternetHost[] = [];
    try {
      hosts.push(await InternetHost.start([{ status: 201 }]), await InternetHost.start([{ status: 202 }]));
    } finally {
      await Promise.all(locks.map((path) => rm(path, { force: true })));
    }
    try {
      expect(hosts.map((h) => h.address).sort()).toEqual(free);
      for (const [i, host] of hosts.entries()) expect((await fetch(`${host.url}/`)).status).toBe(201 + i);
    } finally {
      await Promise.all(hosts.map((h) => h.stop()));
    }
  });
});
