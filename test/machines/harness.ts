import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { MachineRegisterRequest } from '#tern/contracts';
import { newUserKey } from '#tern/nats-auth';

export const ADMIN = `tern_${'m'.repeat(43)}`;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface Reply<T = any> {
  status: number;
  body: T;
}

/** JSON over HTTP against one gateway. */
export function client(base: string) {
  return async function call<T = any>(method: string, path: string, token?: string, body?: unknown): Promise<Reply<T>> {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
}

/** What a real agent sends: one H100 unless told otherwise. */
export function registration(
  pool: string,
  overrides: Partial<MachineRegisterRequest> & { gpuModels?: string[] } = {},
): MachineRegisterRequest {
  const { gpuModels = ['NVIDIA H100 80GB HBM3'], ...rest } = overrides;
  return {
    pool,
    agentVersion: '0.1.0',
    inventory: {
      hostname: 'worker-1',
      cpu: { model: 'AMD EPYC 7B13', cores: 8, threads: 16 },
      memoryBytes: 64 * 1024 ** 3,
      disks: [{ mount: '/', fsType: 'ext4', sizeBytes: 500 * 1024 ** 3, freeBytes: 200 * 1024 ** 3 }],
      os: { platform: 'linux', distro: 'Ubuntu', release: '22.04', kernel: '5.15.0', arch: 'x64' },
      networkInterfaces: [{ name: 'eth0', addresses: ['10.0.0.5'], speedMbps: 10000 }],
      gpus: gpuModels.map((model, index) => ({ index, vendor: 'nvidia' as const, model, memoryMiB: 81559, driverVersion: '550.54' })),
    },
    ...rest,
  };
}

/**
 * A new machine joining with a key pair of its own, as tern-agent does: created by `admin`,
 * registered with its join token; its key, the registration answer and its NATS JWT.
 */
export async function joinWithKey(base: string, admin: string, pool: string, machineId: string) {
  const call = client(base);
  const key = newUserKey();
  const made = await call('POST', '/api/v1/machines', admin, { pool, machineId });
  const reg = await call('POST', '/api/v1/machine/register', made.body.joinToken, registration(pool, { natsPublicKey: key.publicKey }));
  if (reg.status !== 200) throw new Error(`registering ${machineId}: ${reg.status} ${JSON.stringify(reg.body)}`);
  return { key, body: reg.body, jwt: reg.body.nats.jwt as string, namespace: reg.body.nats.namespace as string };
}

/** The `tern` CLI as a user runs it, pointed at a gateway through the environment only. */
export async function tern(args: string[], gateway: string, token: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['bin/tern.js', ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: '/nonexistent',
        TERN_CONFIG: '/nonexistent/config.json',
        TERN_GATEWAY: gateway,
        TERN_TOKEN: token,
      },
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}
