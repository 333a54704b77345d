import { createUser } from '@nats-io/nkeys';
import { plainToInstance } from 'class-transformer';
import { validate, type ValidationError } from 'class-validator';
import { INVENTORY_LIMITS, type MachineDiscovered, type MachineInventory } from '../machine/machine-discovered.js';
import { userPublicKeyProblem } from '../validation.js';
import { MachineKeepaliveRequest, MachineRegisterRequest } from './machine-register.js';

/** NATS' default max_payload: what one machine.discovered message may carry. */
const NATS_MAX_PAYLOAD = 1024 * 1024;

async function problems(cls: new () => object, plain: object): Promise<string[]> {
  const errors = await validate(plainToInstance(cls, plain) as object, { whitelist: true, forbidNonWhitelisted: true });
  return flatten(errors);
}

function flatten(errors: ValidationError[], prefix = ''): string[] {
  return errors.flatMap((e) => [
    ...Object.values(e.constraints ?? {}).map((m) => `${prefix}${e.property}: ${m}`),
    ...flatten(e.children ?? [], `${prefix}${e.property}.`),
  ]);
}

/** A string of `n` characters that JSON writes as six bytes each (\u0001). */
const escaped = (n: number) => '\u0001'.repeat(n);

/** The inventory at every bound: each list at its longest, each string at its longest, all of it escaped in JSON. */
function largestInventory(): MachineInventory {
  const L = INVENTORY_LIMITS;
  const text = escaped(L.text);
  const short = escaped(L.shortText);
  return {
    hostname: escaped(L.hostname),
    cpu: { model: text, cores: Number.MAX_SAFE_INTEGER, threads: Number.MAX_SAFE_INTEGER },
    memoryBytes: Number.MAX_SAFE_INTEGER,
    disks: Array.from({ length: L.disks }, () => ({
      mount: escaped(L.path),
      fsType: short,
      sizeBytes: Number.MAX_SAFE_INTEGER,
      freeBytes: Number.MAX_SAFE_INTEGER,
    })),
    os: { platform: short, distro: text, release: text, kernel: text, arch: short },
    networkInterfaces: Array.from({ length: L.networkInterfaces }, () => ({
      name: short,
      mac: short,
      addresses: Array.from({ length: L.addressesPerInterface }, () => 'ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255'),
      speedMbps: Number.MAX_SAFE_INTEGER,
    })),
    gpus: Array.from({ length: L.gpus }, (_, index) => ({
      index,
      vendor: 'nvidia' as const,
      model: text,
      memoryMiB: Number.MAX_SAFE_INTEGER,
      driverVersion: short,
      cudaVersion: short,
      uuid: short,
    })),
  };
}

const request = (inventory: MachineInventory, over: Partial<MachineRegisterRequest> = {}) => ({
  machineId: 'm-1',
  pool: 'default',
  agentVersion: '0.1.0',
  inventory,
  ...over,
});

describe('MachineRegisterRequest bounds', () => {
  it('accepts the largest inventory its bounds allow, and that inventory fits one NATS message', async () => {
    const inventory = largestInventory();
    expect(await problems(MachineRegisterRequest, request(inventory, { agentVersion: escaped(64) }))).toEqual([]);
    const event: MachineDiscovered = { ...inventory, machineId: 'm'.repeat(64), discoveredAt: new Date().toISOString() };
    // Headroom for the message's headers and a field or two more.
    expect(Buffer.byteLength(JSON.stringify(event))).toBeLessThan(NATS_MAX_PAYLOAD - 64 * 1024);
  });

  it('refuses a field one past its bound with a 400 message naming the field', async () => {
    const small = largestInventory();
    small.networkInterfaces = small.networkInterfaces.slice(0, 1);
    const cases: [object, string][] = [
      [request(small, { agentVersion: 'v'.repeat(65) }), 'agentVersion: agentVersion must be shorter than or equal to 64 characters'],
      [request({ ...small, hostname: 'h'.repeat(254) }), 'inventory.hostname: hostname must be shorter than or equal to 253 characters'],
      [request({ ...small, gpus: [...small.gpus, small.gpus[0]!] }), 'inventory.gpus: gpus must contain no more than 64 elements'],
      [
        request({ ...small, networkInterfaces: [{ ...small.networkInterfaces[0]!, name: 'n'.repeat(65) }] }),
        'inventory.networkInterfaces.0.name: name must be shorter than or equal to 64 characters',
      ],
    ];
    for (const [plain, message] of cases) expect(await problems(MachineRegisterRequest, plain)).toEqual([message]);
    const tooMany = { ...small, networkInterfaces: Array.from({ length: 513 }, () => small.networkInterfaces[0]!) };
    expect(await problems(MachineRegisterRequest, request(tooMany))).toEqual([
      'inventory.networkInterfaces: networkInterfaces must contain no more than 512 elements',
    ]);
  });

  it('bounds the keepalive fields too', async () => {
    expect(await problems(MachineKeepaliveRequest, { machineId: 'm-1', agentVersion: 'v'.repeat(1024 * 1024) })).toEqual([
      'agentVersion: agentVersion must be shorter than or equal to 64 characters',
    ]);
  });
});

describe('nkey public keys', () => {
  const key = createUser().getPublicKey();
  /** The same shape with one character changed: still U and 55 base32 characters, but the CRC no longer matches. */
  const corrupted = key.slice(0, 10) + (key[10] === 'A' ? 'B' : 'A') + key.slice(11);

  it('accepts a key nkeys made and refuses one whose checksum does not match, saying so', async () => {
    expect(userPublicKeyProblem(key)).toBeUndefined();
    expect(userPublicKeyProblem(corrupted)).toMatch(/checksum does not match/);
    expect(userPublicKeyProblem('U' + 'A'.repeat(54))).toMatch(/U followed by 55 base32 characters/);
    expect(userPublicKeyProblem(key.replace(/^U/, 'A'))).toMatch(/U followed by 55 base32 characters/);
    const inventory = largestInventory();
    inventory.networkInterfaces = [];
    expect(await problems(MachineRegisterRequest, request(inventory, { natsPublicKey: key }))).toEqual([]);
    expect(await problems(MachineRegisterRequest, request(inventory, { natsPublicKey: corrupted }))).toEqual([
      expect.stringMatching(/^natsPublicKey: natsPublicKey is not an nkey user public key: its checksum does not match/),
    ]);
  });
});
