import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cgroups, parseKeyed, wasOomKilled } from './cgroups.js';
import { exitFromStatus } from './exit-status.js';

describe('OOM detection', () => {
  it('trusts the oom_kill counter, else a SIGKILL after hitting the limit', () => {
    expect(wasOomKilled({ oomKills: 1, limitHits: 0 }, 137)).toBe(true);
    expect(wasOomKilled({ oomKills: 0, limitHits: 9 }, 137)).toBe(false);
    expect(wasOomKilled({ limitHits: 3 }, 137)).toBe(true);
    expect(wasOomKilled({ limitHits: 3 }, 0)).toBe(false);
    expect(wasOomKilled(undefined, 137)).toBe(false);
  });

  it('parses memory.oom_control', () => {
    expect(parseKeyed('oom_kill_disable 0\nunder_oom 0\noom_kill 2\n')).toEqual({ oom_kill_disable: 0, under_oom: 0, oom_kill: 2 });
  });

  it('reads v1 and v2 counters from where the memory controller is mounted', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tern-cg-'));
    try {
      await mkdir(join(dir, 'memory/tern/c1'), { recursive: true });
      await writeFile(join(dir, 'memory/tern/c1/memory.oom_control'), 'oom_kill_disable 0\nunder_oom 0\noom_kill 1\n');
      await writeFile(join(dir, 'memory/tern/c1/memory.failcnt'), '4\n');
      await writeFile(join(dir, 'mounts-v1'), `cgroup ${dir}/memory cgroup rw,nosuid,memory 0 0\n`);
      expect(await new Cgroups(join(dir, 'mounts-v1')).memoryEvents('/tern/c1')).toEqual({ oomKills: 1, limitHits: 4 });
      expect(await new Cgroups(join(dir, 'mounts-v1')).memoryEvents('/tern/missing')).toBeUndefined();

      await mkdir(join(dir, 'unified/tern/c2'), { recursive: true });
      await writeFile(join(dir, 'unified/tern/c2/memory.events'), 'low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n');
      await writeFile(join(dir, 'mounts-v2'), `cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n`);
      const v2 = new Cgroups(join(dir, 'mounts-v2'));
      expect(await v2.version()).toBe(2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('exitFromStatus', () => {
  it('turns 128+n into the signal and keeps ordinary codes', () => {
    expect(exitFromStatus(137)).toEqual({ exitCode: null, signal: 'SIGKILL' });
    expect(exitFromStatus(143)).toEqual({ exitCode: null, signal: 'SIGTERM' });
    expect(exitFromStatus(3)).toEqual({ exitCode: 3 });
    expect(exitFromStatus(null)).toEqual({ exitCode: null });
  });
});
