import { readFileSync } from 'node:fs';
import { validatePayload } from '#tern/messaging';
import { GpuInventory } from '#tern/contracts';
import { type CommandRunner } from '../command.js';
import { amdProvider, parseRocmSmiJson } from './amd.js';
import { appleProvider, parseMacMemory, parseSystemProfilerDisplays } from './apple.js';
import { detectGpus, type ProbeContext } from './index.js';
import { intelFromSysfs, intelProvider, parseXpuSmiDiscovery } from './intel.js';
import { NVIDIA_QUERY, nvidiaProvider, parseCudaVersion, parseNvidiaSmiCsv } from './nvidia.js';

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');
const GiB = 2 ** 30;

/** A probe context whose commands answer from a table; anything else is "not installed". */
function ctx(commands: Record<string, string>, extra: Partial<ProbeContext> = {}): ProbeContext {
  const run: CommandRunner = async (file, args) => commands[[file, ...args].join(' ')];
  return { run, platform: 'linux', totalMemoryBytes: 32 * GiB, readFile: async () => undefined, listDir: async () => [], ...extra };
}

async function allValid(gpus: GpuInventory[]) {
  for (const g of gpus) expect(await validatePayload(GpuInventory, g)).toEqual({ ok: true, value: expect.anything() });
}

describe('NVIDIA (nvidia-smi)', () => {
  it('reads every GPU of the query CSV with the CUDA version from the banner', async () => {
    expect(parseCudaVersion(fixture('nvidia-smi-banner-a40.txt'))).toBe('12.4');
    const gpus = parseNvidiaSmiCsv(fixture('nvidia-smi-query-8xh100.csv'), '12.2');
    expect(gpus).toHaveLength(8);
    expect(gpus[0]).toEqual({
      index: 0,
      vendor: 'nvidia',
      model: 'NVIDIA H100 80GB HBM3',
      memoryMiB: 81559,
      driverVersion: '535.129.03',
      cudaVersion: '12.2',
      uuid: 'GPU-5c3f3c1e-8a52-4b9f-1f4e-2d8c6a0b7e11',
    });
    expect(gpus.map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    await allValid(gpus);
  });

  it('reports [N/A] memory as 0 and skips blank lines', async () => {
    const gpus = parseNvidiaSmiCsv(fixture('nvidia-smi-query-mixed.csv'));
    expect(gpus.map((g) => [g.model, g.memoryMiB])).toEqual([
      ['NVIDIA GeForce RTX 4090', 24564],
      ['NVIDIA GeForce GTX 1650', 0],
    ]);
    expect(gpus[0].cudaVersion).toBeUndefined();
    await allValid(gpus);
  });

  it('keeps a comma inside a model name', () => {
    expect(parseNvidiaSmiCsv('0, Weird, Name, 1024, 1.0, GPU-1')[0].model).toBe('Weird, Name');
  });

  it('runs the query, then the banner; a missing nvidia-smi means no NVIDIA GPUs', async () => {
    const found = await nvidiaProvider.detect(
      ctx({
        [['nvidia-smi', ...NVIDIA_QUERY].join(' ')]: fixture('nvidia-smi-query-mixed.csv'),
        'nvidia-smi': fixture('nvidia-smi-banner-a40.txt'),
      }),
    );
    expect(found.map((g) => g.cudaVersion)).toEqual(['12.4', '12.4']);
    expect(await nvidiaProvider.detect(ctx({}))).toEqual([]);
  });
});

describe('AMD (rocm-smi)', () => {
  it('reads ROCm 6 JSON: series, VRAM, driver from the system object', async () => {
    const gpus = parseRocmSmiJson(fixture('rocm-smi-mi300x.json'));
    expect(gpus).toEqual([
      { index: 0, vendor: 'amd', model: 'AMD Instinct MI300X OAM', memoryMiB: 196288, driverVersion: '6.7.0', uuid: '28851' },
      { index: 1, vendor: 'amd', model: 'AMD Instinct MI300X OAM', memoryMiB: 196288, driverVersion: '6.7.0', uuid: '51499' },
    ]);
    await allValid(gpus);
  });

  it('reads ROCm 5 JSON with lower-case keys behind a warning line', () => {
    expect(parseRocmSmiJson(fixture('rocm-smi-legacy-vega20.txt'))).toEqual([
      { index: 0, vendor: 'amd', model: 'Vega 20', memoryMiB: 32752, driverVersion: '5.18.13' },
    ]);
  });

  it('gives nothing for garbage or a missing tool', async () => {
    expect(parseRocmSmiJson('rocm-smi: command failed')).toEqual([]);
    expect(parseRocmSmiJson('{"card0": ')).toEqual([]);
    expect(await amdProvider.detect(ctx({}))).toEqual([]);
  });
});

describe('Apple (system_profiler)', () => {
  it('reports Apple silicon with the machine memory (unified) and its Metal family', async () => {
    const gpus = parseSystemProfilerDisplays(fixture('system-profiler-m2pro.json'), 32 * GiB);
    expect(gpus).toEqual([{ index: 0, vendor: 'apple', model: 'Apple M2 Pro', memoryMiB: 32768, driverVersion: 'Metal 3' }]);
    await allValid(gpus);
  });

  it('keeps a discrete Radeon on an Intel Mac and leaves out integrated Intel graphics', () => {
    expect(parseSystemProfilerDisplays(fixture('system-profiler-intel-mac-radeon.json'), 16 * GiB)).toEqual([
      { index: 0, vendor: 'amd', model: 'AMD Radeon Pro 5500M', memoryMiB: 8192, driverVersion: 'Metal 3' },
    ]);
    expect(parseMacMemory('1536 MB')).toBe(1536);
    expect(parseMacMemory('lots')).toBe(0);
  });

  it('only looks on macOS', async () => {
    const commands = { 'system_profiler SPDisplaysDataType -json': fixture('system-profiler-m2pro.json') };
    expect(await appleProvider.detect(ctx(commands))).toEqual([]);
    expect(await appleProvider.detect(ctx(commands, { platform: 'darwin' }))).toHaveLength(1);
  });
});

describe('Intel (xpu-smi, sysfs)', () => {
  it("reads the device list and each device's memory and driver", async () => {
    const gpus = parseXpuSmiDiscovery(fixture('xpu-smi-discovery.json'), { 0: fixture('xpu-smi-discovery-d0.json') });
    expect(gpus[0]).toEqual({
      index: 0,
      vendor: 'intel',
      model: 'Intel(R) Data Center GPU Max 1550',
      memoryMiB: 131072,
      driverVersion: 'I915_23.10.72_PSB_231129.76',
      uuid: '00000000-0000-0029-0000-002f0bd58086',
    });
    expect(gpus[1]).toMatchObject({ index: 1, memoryMiB: 0, driverVersion: '' });
    await allValid(gpus);
  });

  it('asks xpu-smi per device', async () => {
    const found = await intelProvider.detect(
      ctx({ 'xpu-smi discovery -j': fixture('xpu-smi-discovery.json'), 'xpu-smi discovery -d 0 -j': fixture('xpu-smi-discovery-d0.json') }),
    );
    expect(found.map((g) => g.memoryMiB)).toEqual([131072, 0]);
  });

  it('falls back to Intel 3D controllers in sysfs, ignoring integrated graphics and other vendors', async () => {
    const files: Record<string, string> = {
      '/sys/class/drm/card0/device/vendor': '0x8086\n',
      '/sys/class/drm/card0/device/class': '0x030000\n',
      '/sys/class/drm/card1/device/vendor': '0x8086\n',
      '/sys/class/drm/card1/device/class': '0x038000\n',
      '/sys/class/drm/card1/device/device': '0x0bd5\n',
      '/sys/class/drm/card2/device/vendor': '0x10de\n',
      '/sys/class/drm/card2/device/class': '0x030200\n',
    };
    const probe = ctx(
      {},
      { listDir: async () => ['card0', 'card0-DP-1', 'card1', 'card2', 'renderD128'], readFile: async (p) => files[p] },
    );
    expect(await intelFromSysfs(probe)).toEqual([
      { index: 0, vendor: 'intel', model: 'Intel GPU 0x0bd5', memoryMiB: 0, driverVersion: '' },
    ]);
    expect(await intelProvider.detect(probe)).toHaveLength(1);
  });
});

describe('detectGpus', () => {
  it('is empty on a machine without any vendor tool (like the CI host)', async () => {
    expect(await detectGpus(ctx({}))).toEqual([]);
  });

  it('treats a provider that throws as having found nothing, and says so', async () => {
    const errors: string[] = [];
    const broken = { vendor: 'nvidia' as const, detect: async () => Promise.reject(new Error('driver/library version mismatch')) };
    expect(await detectGpus(ctx({}), [broken, amdProvider], (v, e) => errors.push(`${v}: ${e.message}`))).toEqual([]);
    expect(errors).toEqual(['nvidia: driver/library version mismatch']);
  });
});
