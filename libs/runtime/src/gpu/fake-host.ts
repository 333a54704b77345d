import type { DeviceNumbers, HostIo } from './device-io.js';

/** A described machine for GPU tests: device nodes, files, and `ldconfig -p` output. */
export function fakeHost(options: { devices?: Record<string, DeviceNumbers>; files?: Record<string, string>; ldconfig?: string }): HostIo {
  const devices = options.devices ?? {};
  const files = options.files ?? {};
  const all = [...Object.keys(devices), ...Object.keys(files)];
  return {
    readdir: async (dir) =>
      all.filter((p) => p.startsWith(`${dir}/`) && !p.slice(dir.length + 1).includes('/')).map((p) => p.slice(dir.length + 1)),
    readFile: async (path) => {
      if (!(path in files)) throw Object.assign(new Error(`ENOENT ${path}`), { code: 'ENOENT' });
      return files[path]!;
    },
    exists: async (path) => path in files || path in devices,
    statDevice: async (path) => devices[path],
    ldconfig: async () => options.ldconfig ?? '',
  };
}
