import {
  BadRequestException,
  ConflictException,
  ForbiddenException,
  Inject,
  Injectable,
  Logger,
  ServiceUnavailableException,
  UnauthorizedException,
} from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import {
  type Contract,
  MACHINE_DISCOVERED,
  MACHINE_REGISTERED,
  MACHINE_STATE_CHANGED,
  type MachineRegisterRequest,
  type MachineRegisterResponse,
  type MachineState,
  type MachineStateChanged,
  machineStateChangedMsgId,
} from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { hashToken, type Machine, type Pool, queryRows } from '#tern/persistence';
import { type Principal } from '../auth/principal.js';
import { generateMachineToken } from '../machines/machine-tokens.js';
import { PoolsService } from '../pools/pools.service.js';
import { type MachineCaller } from './machine-caller.js';
import { discoveredEvent, inventoryColumns } from './machine-inventory.js';

/** States a registration moves to registered; a ready or unschedulable machine keeps its state (its heartbeats decide). */
const REGISTERS_FROM: readonly MachineState[] = ['pending', 'offline'];

/** Why a join token cannot be redeemed, or undefined when it can. */
export function joinTokenProblem(machine: Pick<Machine, 'joinTokenUsedAt' | 'joinTokenExpiresAt'>, now = new Date()): string | undefined {
  if (machine.joinTokenUsedAt) {
    return 'join token already used; the agent registers again with the machine token it received, or create a new join token with tern machine create';
  }
  if (machine.joinTokenExpiresAt && machine.joinTokenExpiresAt <= now) {
    return `join token expired at ${machine.joinTokenExpiresAt.toISOString()}; create a new one with tern machine create`;
  }
  return undefined;
}

/**
 * The agent's one HTTPS call. Whatever the token, the inventory is stored, the machine moves
 * to registered (unless it is already heartbeating), and machine.registered, machine.discovered
 * and, for a move, machine.state-changed are published inside the transaction: if NATS cannot
 * take them, nothing is stored and the join token stays unused, so the agent can simply retry.
 */
@Injectable()
export class MachineRegistrationService {
  private readonly logger = new Logger('machine-registration');

  constructor(
    private readonly dataSource: DataSource,
    private readonly pools: PoolsService,
    private readonly messaging: Messaging,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  register(caller: MachineCaller, body: MachineRegisterRequest): Promise<MachineRegisterResponse> {
    switch (caller.kind) {
      case 'join-token':
        return this.redeemJoinToken(caller.machine, body);
      case 'machine-token':
        return this.registerAgain(caller.machine, body);
      case 'api-token':
        return this.registerWithApiToken(caller.principal, body);
    }
  }

  private async redeemJoinToken(machine: Machine, body: MachineRegisterRequest): Promise<MachineRegisterResponse> {
    const problem = joinTokenProblem(machine);
    if (problem) throw new UnauthorizedException(problem);
    checkIdentity(machine, body, 'join token');
    const pool = await this.pools.require(machine.pool);
    const machineToken = generateMachineToken();
    const redeemed = await this.inTransaction(async (runner) => {
      // The one use: a concurrent second redemption finds join_token_used_at set and gets nothing.
      const [claimed] = await queryRows(
        runner,
        `UPDATE machines SET join_token_used_at = now(), credential_hash = $2
         WHERE id = $1 AND join_token_used_at IS NULL AND join_token_expires_at > now() RETURNING id`,
        [machine.id, hashToken(machineToken)],
      );
      if (!claimed) return false;
      await this.store(runner, machine.id, body, 'agent registered with its join token');
      return true;
    });
    if (!redeemed) throw new UnauthorizedException(await this.whyNotRedeemed(machine.id));
    return this.response(machine.id, pool, machineToken);
  }

  /** Another request redeemed the token a moment ago, it expired meanwhile, or the machine was removed. */
  private async whyNotRedeemed(machineId: string): Promise<string> {
    const [row] = await this.dataSource.query<{ used_at: Date | null; expires_at: Date | null; now: Date }[]>(
      `SELECT join_token_used_at AS used_at, join_token_expires_at AS expires_at, now() AS now FROM machines WHERE id = $1`,
      [machineId],
    );
    if (!row) return 'unknown token: its machine was removed';
    return (
      joinTokenProblem({ joinTokenUsedAt: row.used_at, joinTokenExpiresAt: row.expires_at }, row.now) ??
      'join token already used; the agent registers again with the machine token it received'
    );
  }

  /** After an agent restart, or when the gateway lost the machine's state: the machine token proves who it is. */
  private async registerAgain(machine: Machine, body: MachineRegisterRequest): Promise<MachineRegisterResponse> {
    checkIdentity(machine, body, 'machine token');
    const pool = await this.pools.require(machine.pool);
    await this.inTransaction((runner) => this.store(runner, machine.id, body, 'agent registered again with its machine token'));
    return this.response(machine.id, pool);
  }

  /** Creates or updates the machine named in the body, and issues it a (new) machine token. */
  private async registerWithApiToken(principal: Principal, body: MachineRegisterRequest): Promise<MachineRegisterResponse> {
    if (principal.role !== 'admin') {
      throw new ForbiddenException('registering a machine with an API token needs an admin token; or use a join token from tern machine create');
    }
    if (!body.machineId) throw new BadRequestException('machineId is required when registering with an API token (the machine is created on the spot)');
    const machineId = body.machineId;
    const pool = await this.pools.require(body.pool);
    const machineToken = generateMachineToken();
    await this.inTransaction(async (runner) => {
      // An outstanding join token for this machine is spent: the machine now has its credential.
      const [row] = await queryRows<{ inserted: boolean }>(
        runner,
        `INSERT INTO machines (id, pool, state, credential_hash) VALUES ($1, $2, 'pending', $3)
         ON CONFLICT (id) DO UPDATE SET
           pool = EXCLUDED.pool,
           credential_hash = EXCLUDED.credential_hash,
           join_token_used_at = CASE WHEN machines.join_token_hash IS NOT NULL THEN COALESCE(machines.join_token_used_at, now()) END,
           updated_at = now()
         RETURNING (xmax = 0) AS inserted`,
        [machineId, pool.name, hashToken(machineToken)],
      );
      await this.store(runner, machineId, body, 'registered with an admin API token', row.inserted);
    });
    return this.response(machineId, pool, machineToken);
  }

  /** Inventory onto the row, the state move, and the events; runs inside the caller's transaction. */
  private async store(runner: QueryRunner, machineId: string, body: MachineRegisterRequest, reason: string, created = false): Promise<void> {
    const [before] = await queryRows<{ state: MachineState }>(runner, `SELECT state FROM machines WHERE id = $1 FOR UPDATE`, [machineId]);
    const inv = inventoryColumns(body.inventory);
    const [row] = await queryRows<{ pool: string; registered_at: Date }>(
      runner,
      `UPDATE machines SET
         hostname = $2, cpu_model = $3, cpu_cores = $4, cpu_threads = $5, memory_bytes = $6,
         gpus = $7::jsonb, disks = $8::jsonb, os = $9::jsonb,
         network = jsonb_set(COALESCE(network, '{}'::jsonb), '{interfaces}', $10::jsonb),
         agent_version = $11, registered_at = now(), updated_at = now()
       WHERE id = $1 RETURNING pool, registered_at`,
      [
        machineId,
        inv.hostname,
        inv.cpuModel,
        inv.cpuCores,
        inv.cpuThreads,
        inv.memoryBytes,
        JSON.stringify(inv.gpus),
        JSON.stringify(inv.disks),
        JSON.stringify(inv.os),
        JSON.stringify(inv.interfaces),
        body.agentVersion,
      ],
    );
    const at = row.registered_at;
    await this.publish(MACHINE_REGISTERED, `${machineId}:registered:${at.toISOString()}`, {
      machineId,
      pool: row.pool,
      hostname: inv.hostname,
      agentVersion: body.agentVersion,
      registeredAt: at.toISOString(),
    });
    await this.publish(MACHINE_DISCOVERED, `${machineId}:discovered:${at.toISOString()}`, discoveredEvent(machineId, body.inventory, at));
    if (!REGISTERS_FROM.includes(before.state)) return;
    const [moved] = await queryRows<{ state_changed_at: Date }>(
      runner,
      `UPDATE machines SET state = 'registered', state_reason = $2, state_changed_at = now() WHERE id = $1 RETURNING state_changed_at`,
      [machineId, reason],
    );
    const event: MachineStateChanged = {
      machineId,
      pool: row.pool,
      from: created ? null : before.state,
      to: 'registered',
      reason,
      changedAt: moved.state_changed_at.toISOString(),
    };
    await this.publish(MACHINE_STATE_CHANGED, machineStateChangedMsgId(event), event);
    this.logger.log({ machineId, from: event.from, reason }, `machine ${machineId}: ${event.from ?? 'new'} → registered`);
  }

  private async publish<T extends object>(contract: Contract<T>, msgId: string, payload: T): Promise<void> {
    try {
      await this.messaging.publish(contract, payload, { msgId });
    } catch (e) {
      throw new ServiceUnavailableException(`cannot record the registration on NATS (${(e as Error).message}); try again`);
    }
  }

  private inTransaction<T>(work: (runner: QueryRunner) => Promise<T>): Promise<T> {
    return this.dataSource.transaction((m) => work(m.queryRunner!));
  }

  private response(machineId: string, pool: Pool, machineToken?: string): MachineRegisterResponse {
    const { nats, machines } = this.config;
    return {
      machineId,
      pool: pool.name,
      ...(machineToken ? { machineToken } : {}),
      nats: {
        servers: machines.natsPublicUrls,
        namespace: nats.namespace,
        // The agent connects to the same server as the control plane, with the same credentials.
        ...(nats.user ? { user: nats.user } : {}),
        ...(nats.pass ? { pass: nats.pass } : {}),
        ...(nats.token ? { token: nats.token } : {}),
      },
      heartbeatIntervalSeconds: machines.heartbeatIntervalSeconds,
      heartbeatTtlSeconds: machines.heartbeatTtlSeconds,
      ...(pool.minNetworkMbps !== null ? { minNetworkMbps: pool.minNetworkMbps } : {}),
    };
  }
}

/** A join or machine token is bound to one machine in one pool; the body may repeat them but not change them. */
function checkIdentity(machine: Machine, body: MachineRegisterRequest, token: string): void {
  if (body.machineId && body.machineId !== machine.id) {
    throw new ConflictException(`this ${token} belongs to machine "${machine.id}", not "${body.machineId}"`);
  }
  if (body.pool !== machine.pool) {
    throw new ConflictException(
      `pool mismatch: machine "${machine.id}" is in pool "${machine.pool}" but the agent asked for "${body.pool}"; run tern-agent init with --pool ${machine.pool}`,
    );
  }
}
