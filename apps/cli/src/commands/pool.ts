import { Command, InvalidArgumentError } from 'commander';
import type { CreatePoolRequest, PoolView } from '#tern/contracts';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { mbps } from '../format.js';
import { table } from '../table.js';

function client() {
  return new ApiClient(resolveContext());
}

function wholeNumber(value: string): number {
  if (!/^\d+$/.test(value.trim())) throw new InvalidArgumentError('must be a whole number of Mbit/s, e.g. 100');
  return Number(value);
}

function fraction(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError('must be a number from 0 to 1, e.g. 0.9');
  return n;
}

function gpuTypes(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export function renderPools(pools: PoolView[]): string {
  return table(
    ['NAME', 'GPU TYPES', 'MIN NETWORK', 'MIN REPUTATION', 'MACHINES'],
    pools.map((p) => [
      p.name,
      p.allowedGpuTypes.length ? p.allowedGpuTypes.join(',') : 'any',
      p.minNetworkMbps ? mbps(p.minNetworkMbps) : '-',
      p.minReputation !== null ? String(p.minReputation) : '-',
      `${p.machines.byState.ready ?? 0} ready / ${p.machines.total}`,
    ]),
  );
}

export function poolCommand(): Command {
  const pool = new Command('pool').description('Pools: named groups of machines with admission rules');

  pool
    .command('list')
    .description('Every pool with its rules and how many of its machines are ready')
    .option('--json', 'print the raw JSON')
    .action(async (opts: { json?: boolean }) => {
      const { body } = await client().get<PoolView[]>('/api/v1/pools');
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderPools(body));
    });

  pool
    .command('create')
    .description('Create a pool (operator token)')
    .argument('<name>', 'lower-case letters, digits, - and _')
    .option('--gpu-types <types>', 'comma-separated GPU types admitted, e.g. H100,A100 (default: any)', gpuTypes)
    .option('--min-network-mbps <n>', 'lowest measured network throughput, Mbit/s', wholeNumber)
    .option('--min-reputation <x>', 'lowest reputation score, 0 to 1', fraction)
    .option('--json', 'print the raw JSON')
    .action(async (name: string, opts: { gpuTypes?: string[]; minNetworkMbps?: number; minReputation?: number; json?: boolean }) => {
      const request: CreatePoolRequest = {
        name,
        ...(opts.gpuTypes ? { allowedGpuTypes: opts.gpuTypes } : {}),
        ...(opts.minNetworkMbps !== undefined ? { minNetworkMbps: opts.minNetworkMbps } : {}),
        ...(opts.minReputation !== undefined ? { minReputation: opts.minReputation } : {}),
      };
      const { body } = await client().request<PoolView>('POST', '/api/v1/pools', request);
      console.log(opts.json ? JSON.stringify(body, null, 2) : `Pool ${body.name} created.\n\n${renderPools([body])}`);
    });

  pool
    .command('delete')
    .description('Delete a pool that no machine, deployment or live sandbox uses; otherwise says what still does (operator token)')
    .argument('<name>', 'pool name')
    .action(async (name: string) => {
      await client().request('DELETE', `/api/v1/pools/${encodeURIComponent(name)}`);
      console.log(`Pool ${name} deleted.`);
    });

  return pool;
}
