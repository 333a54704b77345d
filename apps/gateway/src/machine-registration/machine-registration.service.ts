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
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import {
  type Contract,
  MACHINE_DISCOVERED,
  MACHINE_REGISTERED,
  MACHINE_STATE_CHANGED,
  type MachineRegisterRequest,
  type MachineRegistryAccess,
  type MachineRegisterResponse,
  type MachineState,
  type MachineStateChanged,
  machineStateChangedMsgId,
} from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { hashToken, type Machine, MachinesRepository, type Pool } from '#tern/persistence';
import { type Principal } from '../auth/principal.js';
import { generateMachineToken } from '../machines/machine-tokens.js';
import { PoolsService } from '../pools/pools.service.js';
import { type MachineCaller } from './machine-caller.js';
import { discoveredEvent, inventoryColumns } from './machine-inventory.js';
import { MachineNatsUsers } from './machine-nats-users.js';

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
    private readonly machines: MachinesRepository,
    private readonly pools: PoolsService,
    private readonly messaging: Messaging,
    private readonly natsUsers: MachineNatsUsers,
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
    const redeemed = await this.machines.transaction(async (tx) => {
      // The one use: a concurrent second redemption finds the token used and gets false.
      if (!(await tx.redeemJoinToken(machine.id, hashToken(machineToken)))) return false;
      await this.store(tx, machine.id, body, 'agent registered with its join token');
      return true;
    });
    if (!redeemed) throw new UnauthorizedException(await this.whyNotRedeemed(machine.id));
    return this.response(machine.id, pool, body, machineToken);
  }

  /** Another request redeemed the token a moment ago, it expired meanwhile, or the machine was removed. */
  private async whyNotRedeemed(machineId: string): Promise<string> {
    const token = await this.machines.joinTokenStatus(machineId);
    if (!token) return 'unknown token: its machine was removed';
    return (
      joinTokenProblem({ joinTokenUsedAt: token.usedAt, joinTokenExpiresAt: token.expiresAt }, token.now) ??
      'join token already used; the agent registers again with the machine token it received'
    );
  }

  /** After an agent restart, or when the gateway lost the machine's state: the machine token proves who it is. */
  private async registerAgain(machine: Machine, body: MachineRegisterRequest): Promise<MachineRegisterResponse> {
    checkIdentity(machine, body, 'machine token');
    const pool = await this.pools.require(machine.pool);
    await this.machines.transaction((tx) => this.store(tx, machine.id, body, 'agent registered again with its machine token'));
    return this.response(machine.id, pool, body);
  }

  /**
   * Creates the machine named in the body and issues its machine token. Operator tokens only,
   * and only for a new machine id: an API token never replaces an existing machine's credential
   * (that would let whoever holds it take over the machine's identity and its work).
   */
  private async registerWithApiToken(principal: Principal, body: MachineRegisterRequest): Promise<MachineRegisterResponse> {
    if (principal.role !== 'operator') {
      throw new ForbiddenException(
        'this action needs an operator token: registering a machine with an API token is a platform action; or use a join token from tern machine create',
      );
    }
    if (!body.machineId)
      throw new BadRequestException('machineId is required when registering with an API token (the machine is created on the spot)');
    const machineId = body.machineId;
    const pool = await this.pools.require(body.pool);
    const machineToken = generateMachineToken();
    await this.machines.transaction(async (tx) => {
      if (!(await tx.insertWithCredential(machineId, pool.name, hashToken(machineToken)))) {
        throw new ConflictException(
          `machine "${machineId}" already exists: an API token never replaces a machine's credential; the agent registers with its machine token, or remove the machine first (tern machine delete ${machineId})`,
        );
      }
      await this.store(tx, machineId, body, 'registered with an operator API token', true);
    });
    return this.response(machineId, pool, body, machineToken);
  }

  /** Inventory onto the row, the state move, and the events; runs inside the caller's transaction. */
  private async store(
    tx: MachinesRepository,
    machineId: string,
    body: MachineRegisterRequest,
    reason: string,
    created = false,
  ): Promise<void> {
    const before = await tx.lockState(machineId);
    const inv = inventoryColumns(body.inventory);
    const row = await tx.storeInventory(machineId, inv, body.agentVersion);
    if (!before || !row) throw new UnauthorizedException('unknown token: its machine was removed');
    const at = row.registeredAt;
    await this.publish(MACHINE_REGISTERED, `${machineId}:registered:${at.toISOString()}`, {
      machineId,
      pool: row.pool,
      hostname: inv.hostname,
      agentVersion: body.agentVersion,
      registeredAt: at.toISOString(),
    });
    await this.publish(MACHINE_DISCOVERED, `${machineId}:discovered:${at.toISOString()}`, discoveredEvent(machineId, body.inventory, at));
    if (!REGISTERS_FROM.includes(before)) return;
    const changedAt = await tx.markRegistered(machineId, reason);
    const event: MachineStateChanged = {
      machineId,
      pool: row.pool,
      from: created ? null : before,
      to: 'registered',
      reason,
      changedAt: changedAt!.toISOString(),
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

  private async response(
    machineId: string,
    pool: Pool,
    body: MachineRegisterRequest,
    machineToken?: string,
  ): Promise<MachineRegisterResponse> {
    const { nats, machines, registry } = this.config;
    // Operator mode: the machine's own user, never the control plane's credentials.
    const jwt = this.natsUsers.enabled && body.natsPublicKey ? await this.natsUsers.issue(machineId, body.natsPublicKey) : undefined;
    return {
      machineId,
      pool: pool.name,
      ...(machineToken ? { machineToken } : {}),
      nats: {
        servers: machines.natsPublicUrls,
        namespace: nats.namespace,
        ...(jwt ? { jwt } : {}),
        // Without operator mode, the agent connects with the control plane's credentials.
        ...(!jwt && nats.user ? { user: nats.user } : {}),
        ...(!jwt && nats.pass ? { pass: nats.pass } : {}),
        ...(!jwt && nats.token ? { token: nats.token } : {}),
      },
      heartbeatIntervalSeconds: machines.heartbeatIntervalSeconds,
      heartbeatTtlSeconds: machines.heartbeatTtlSeconds,
      ...(registry ? { registry: machineRegistryAccess(registry) } : {}),
      ...(pool.minNetworkMbps !== null ? { minNetworkMbps: pool.minNetworkMbps } : {}),
    };
  }
}

/**
 * How a machine reaches the registry. With token auth it logs in with its own machine token and
 * the gateway's token service grants it pull of what is placed on it; else the shared pull user
 * comes over the registration's HTTPS answer, like the NATS user (push stays with builders).
 */
function machineRegistryAccess(registry: NonNullable<TernConfig['registry']>): MachineRegistryAccess {
  const where = { host: registry.host, insecure: registry.insecure };
  return registry.token ? { ...where, tokenAuth: true } : { ...where, ...(registry.pull ?? {}) };
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
