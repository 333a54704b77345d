import { isAbsolute, posix } from 'node:path';
import { InvalidContainerSpecError } from './errors.js';
import { parseIpv4Cidr } from './net/ipv4.js';
import type { ContainerSpec } from './types.js';

export const CONTAINER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const VOLUME_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RESERVED_TARGETS = ['/proc', '/sys', '/dev'];
const MIN_MEMORY = 6 * 1024 * 1024;

const isInt = (n: unknown, min: number, max = Number.MAX_SAFE_INTEGER) =>
  Number.isInteger(n) && (n as number) >= min && (n as number) <= max;

/** Checks a spec before anything touches the machine; throws InvalidContainerSpecError naming the field. */
export function validateSpec(spec: ContainerSpec): void {
  const fail = (msg: string): never => {
    throw new InvalidContainerSpecError(msg, spec.id);
  };
  if (typeof spec.id !== 'string' || !CONTAINER_ID.test(spec.id)) fail(`id "${spec.id}" must match ${CONTAINER_ID}`);
  if (typeof spec.image !== 'string' || !spec.image) fail('image is required');
  for (const a of spec.args ?? []) if (typeof a !== 'string' || a.includes('\0')) fail('args must be strings without NUL');
  for (const [k, v] of Object.entries(spec.env ?? {})) {
    if (!ENV_NAME.test(k)) fail(`env name "${k}" is not a valid variable name`);
    if (typeof v !== 'string' || v.includes('\0')) fail(`env ${k} must be a string without NUL`);
  }
  if (spec.cwd !== undefined && !isAbsolute(spec.cwd)) fail('cwd must be an absolute path');
  if (spec.user && !(isInt(spec.user.uid, 0, 2 ** 32 - 2) && isInt(spec.user.gid, 0, 2 ** 32 - 2)))
    fail('user uid/gid must be non-negative integers');
  if (spec.memoryBytes !== undefined && !isInt(spec.memoryBytes, MIN_MEMORY)) fail(`memoryBytes must be an integer ≥ ${MIN_MEMORY}`);
  if (spec.cpuMillicores !== undefined && !isInt(spec.cpuMillicores, 1)) fail('cpuMillicores must be a positive integer');
  if (spec.pidsLimit !== undefined && !isInt(spec.pidsLimit, 1)) fail('pidsLimit must be a positive integer');
  if (spec.tmpBytes !== undefined && !isInt(spec.tmpBytes, 1)) fail('tmpBytes must be a positive integer');
  if (spec.shmBytes !== undefined && !isInt(spec.shmBytes, 1)) fail('shmBytes must be a positive integer');
  if (spec.port !== undefined && !isInt(spec.port, 1, 65535)) fail('port must be 1-65535');
  if (spec.network !== undefined && !['private', 'host', 'none'].includes(spec.network))
    fail('network must be "private", "host" or "none"');
  if (spec.egress !== undefined) {
    if (spec.network !== 'private') fail('egress applies to the private network only');
    if (spec.egress.block !== undefined && typeof spec.egress.block !== 'boolean') fail('egress.block must be true or false');
    if (spec.egress.allow !== undefined) {
      if (!Array.isArray(spec.egress.allow)) fail('egress.allow must be a list of IPv4 CIDRs');
      for (const c of spec.egress.allow!) {
        const net = typeof c === 'string' ? parseIpv4Cidr(c) : `${JSON.stringify(c)} is not a CIDR`;
        if (typeof net === 'string') fail(`egress.allow: ${net}`);
      }
    }
  }
  for (const v of spec.volumes ?? []) {
    const segments = typeof v.name === 'string' ? v.name.split('/') : [];
    if (!segments.length || !segments.every((s) => VOLUME_SEGMENT.test(s) && s !== '..' && s !== '.')) {
      fail(`volume name "${v.name}" must be segments of letters, digits, _ . - separated by /`);
    }
    const target = typeof v.containerPath === 'string' ? posix.normalize(v.containerPath) : '';
    if (!isAbsolute(target) || target === '/' || v.containerPath.split('/').includes('..'))
      fail(`volume path "${v.containerPath}" must be an absolute path below /`);
    if (RESERVED_TARGETS.some((r) => target === r || target.startsWith(`${r}/`))) fail(`volume path "${v.containerPath}" is reserved`);
    if (v.hostPath !== undefined && (typeof v.hostPath !== 'string' || !isAbsolute(v.hostPath)))
      fail(`volume source "${v.hostPath}" must be an absolute path`);
  }
  for (const b of spec.binds ?? []) {
    if (typeof b.hostPath !== 'string' || !isAbsolute(b.hostPath)) fail(`bind source "${b.hostPath}" must be an absolute path`);
    const target = typeof b.containerPath === 'string' ? posix.normalize(b.containerPath) : '';
    if (!isAbsolute(target) || target === '/' || b.containerPath.split('/').includes('..'))
      fail(`bind path "${b.containerPath}" must be an absolute path below /`);
    if (RESERVED_TARGETS.some((r) => target === r || target.startsWith(`${r}/`))) fail(`bind path "${b.containerPath}" is reserved`);
  }
  for (const d of spec.gpus?.devices ?? []) if (!isInt(d.index, 0)) fail('gpu index must be a non-negative integer');
}
