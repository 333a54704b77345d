import { Command } from 'commander';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import type {
  CreatedMachine,
  CreateMachineRequest,
  MachineDetail,
  MachineReputation,
  MachineSummary,
  RotatedMachineToken,
} from '#tern/contracts';
import { renderCreated, renderMachine, renderMachineList, renderReputation } from './machine-views.js';

function client() {
  return new ApiClient(resolveContext());
}

export function machineCommand(): Command {
  const machine = new Command('machine').description('Worker machines: create join tokens, list, inspect, remove');
  for (const add of [addCreate, addList, addShow, addReputation, addRevoke, addRotateToken, addDelete]) add(machine);
  return machine;
}

function addCreate(machine: Command): void {
  machine
    .command('create')
    .description('Create a machine and its one-time join token; prints the tern-agent line to run on the worker (operator token)')
    .requiredOption('--pool <pool>', 'the pool the machine joins')
    .option('--id <machineId>', 'machine id (default: a random m-… id)')
    .option('--json', 'print the raw JSON')
    .action(async (opts: { pool: string; id?: string; json?: boolean }) => {
      const request: CreateMachineRequest = { pool: opts.pool, ...(opts.id ? { machineId: opts.id } : {}) };
      const { body } = await client().request<CreatedMachine>('POST', '/api/v1/machines', request);
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderCreated(body));
    });
}

function addList(machine: Command): void {
  machine
    .command('list')
    .description('Machines with state, hardware, current use, reputation and last heartbeat')
    .option('--pool <pool>', 'only this pool')
    .option('--state <state>', 'only this state (pending, registered, ready, unschedulable, offline)')
    .option('--json', 'print the raw JSON')
    .action(async (opts: { pool?: string; state?: string; json?: boolean }) => {
      const query = new URLSearchParams({
        ...(opts.pool ? { pool: opts.pool } : {}),
        ...(opts.state ? { state: opts.state } : {}),
      }).toString();
      const { body } = await client().get<MachineSummary[]>(`/api/v1/machines${query ? `?${query}` : ''}`);
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderMachineList(body));
    });
}

function addShow(machine: Command): void {
  machine
    .command('show')
    .description('One machine in full: state reason, inventory, network test, reputation and its components, last heartbeat')
    .argument('<id>', 'machine id')
    .option('--json', 'print the raw JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const { body } = await client().get<MachineDetail>(`/api/v1/machines/${encodeURIComponent(id)}`);
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderMachine(body));
    });
}

function addReputation(machine: Command): void {
  machine
    .command('reputation')
    .description("A machine's reputation: current score, its components and its history (newest first)")
    .argument('<id>', 'machine id')
    .option('--from <time>', 'only history from this moment (ISO 8601)')
    .option('--limit <n>', 'at most this many history rows (default 100)')
    .option('--json', 'print the raw JSON')
    .action(async (id: string, opts: { from?: string; limit?: string; json?: boolean }) => {
      const query = new URLSearchParams({
        ...(opts.from ? { from: opts.from } : {}),
        ...(opts.limit ? { limit: opts.limit } : {}),
      }).toString();
      const { body } = await client().get<MachineReputation>(
        `/api/v1/machines/${encodeURIComponent(id)}/reputation${query ? `?${query}` : ''}`,
      );
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderReputation(body));
    });
}

function addRevoke(machine: Command): void {
  machine
    .command('revoke')
    .description('Cut a machine off at once: its machine token stops working and its NATS connection is closed (operator token)')
    .argument('<id>', 'machine id')
    .action(async (id: string) => {
      await client().request('POST', `/api/v1/machines/${encodeURIComponent(id)}/revoke`);
      console.log(`Machine ${id} revoked: it is disconnected; to let it back, delete it and create it again.`);
    });
}

function addRotateToken(machine: Command): void {
  machine
    .command('rotate-token')
    .description(
      "Replace a machine's token; the old one stops working at once (operator token). On the worker, tern-agent rotate-token does the same with the machine's own token",
    )
    .argument('<id>', 'machine id')
    .option('--json', 'print the raw JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const { body } = await client().request<RotatedMachineToken>('POST', `/api/v1/machines/${encodeURIComponent(id)}/rotate-token`);
      console.log(
        opts.json
          ? JSON.stringify(body, null, 2)
          : `Machine ${body.machineId} has a new token; the old one no longer works. It is shown only now; on the worker run:\n\n  tern-agent config set token ${body.machineToken}`,
      );
    });
}

function addDelete(machine: Command): void {
  machine
    .command('delete')
    .description("Remove a machine; its tokens stop working and its agent's heartbeats are ignored (operator token)")
    .argument('<id>', 'machine id')
    .action(async (id: string) => {
      await client().request('DELETE', `/api/v1/machines/${encodeURIComponent(id)}`);
      console.log(`Machine ${id} removed.`);
    });
}
