import { ConflictException, Inject, Injectable, NotFoundException } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { type CreatedMachine, type MachineReputation, type MachineState, type MachineStateChanges } from '#tern/contracts';
import { hashToken, isUniqueViolation, type Machine, MachinesRepository } from '#tern/persistence';
import { type Principal } from '../auth/principal.js';
import { PoolsService } from '../pools/pools.service.js';
import { HeartbeatSnapshotReader } from './heartbeat-snapshot-reader.js';
import { generateJoinToken, generateMachineId } from './machine-tokens.js';
import { type MachineDetail, machineDetail, type MachineSummary, machineSummary } from './machine-views.js';
import { ReputationReader } from './reputation-reader.js';
import { MachineNatsUsers } from '../machine-registration/machine-nats-users.js';

export type { CreatedMachine, MachineReputation } from '#tern/contracts';

@Injectable()
export class MachinesService {
  constructor(
    private readonly machines: MachinesRepository,
    private readonly pools: PoolsService,
    private readonly snapshots: HeartbeatSnapshotReader,
    private readonly reputation: ReputationReader,
    private readonly natsUsers: MachineNatsUsers,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  /**
   * A pending machine and its one-time join token, valid MACHINE_JOIN_TOKEN_TTL_SECONDS; the
   * init line names GATEWAY_PUBLIC_URL when set, else `gatewayUrl` (as the caller reached it).
   */
  async create(pool: string, machineId: string | undefined, gatewayUrl: string): Promise<CreatedMachine> {
    await this.pools.require(pool);
    const id = machineId ?? generateMachineId();
    const joinToken = generateJoinToken();
    const expiresAt = new Date(Date.now() + this.config.machines.joinTokenTtlSeconds * 1000);
    try {
      await this.machines.createPending({ id, pool, joinTokenHash: hashToken(joinToken), joinTokenExpiresAt: expiresAt });
    } catch (e) {
      if (isUniqueViolation(e, 'pk_machines')) {
        throw new ConflictException(`machine "${id}" already exists; remove it first (tern machine delete ${id}) or choose another id`);
      }
      throw e;
    }
    return {
      machineId: id,
      pool,
      joinToken,
      expiresAt: expiresAt.toISOString(),
      command: `tern-agent init --gateway ${this.config.machines.gatewayPublicUrl ?? gatewayUrl} --token ${joinToken} --pool ${pool}`,
    };
  }

  /** Every machine for the operator; for a workspace token, the machines its work ran on. */
  async list(caller: Principal, filter: { pool?: string; state?: MachineState } = {}): Promise<MachineSummary[]> {
    let rows = await this.machines.list(filter);
    if (caller.role !== 'operator') {
      const used = new Set(await this.machines.idsUsedByWorkspace(caller.workspaceId));
      rows = rows.filter((r) => used.has(r.id));
    }
    const beats = await this.snapshots.getMany(rows.filter((r) => r.lastHeartbeatAt).map((r) => r.id));
    const scores = await this.reputation.current(rows.map((r) => r.id));
    return rows.map((r) => machineSummary(r, beats.get(r.id), scores.get(r.id)));
  }

  /** A workspace token sees its machines without their owners' network interfaces (addresses, MACs). */
  async get(caller: Principal, id: string): Promise<MachineDetail> {
    const row = await this.require(id, caller);
    const scores = await this.reputation.current([id]);
    const detail = machineDetail(row, row.lastHeartbeatAt ? await this.snapshots.get(id) : undefined, scores.get(id));
    return caller.role === 'operator' ? detail : { ...detail, networkInterfaces: [] };
  }

  /** The machine's current reputation and its stored history (newest first). */
  async reputationOf(caller: Principal, id: string, from: Date | undefined, limit: number): Promise<MachineReputation> {
    await this.require(id, caller);
    const current = (await this.reputation.current([id])).get(id) ?? null;
    return {
      machineId: id,
      ...(current ?? { score: null, components: null, observed: null, standing: null, computedAt: null }),
      history: await this.reputation.history(id, from, limit),
    };
  }

  /**
   * Forgets the machine: its tokens stop working at once (they are columns of the row), so does
   * its NATS user (revoked in the account), its agent's heartbeats are ignored from now on, and
   * its containers keep their history.
   */
  async remove(id: string): Promise<void> {
    const key = (await this.machines.findById(id))?.natsPublicKey;
    if (!(await this.machines.remove(id))) throw new NotFoundException(`machine "${id}" not found`);
    await this.snapshots.remove(id);
    // Its NATS connections close at once, and its JWT (hours left) stops working.
    if (key) await this.natsUsers.revoke(id, key, 'the machine was deleted');
  }

  /**
   * Cuts a machine off without forgetting it: its machine token stops working (so it cannot
   * renew its NATS user) and its NATS user is revoked, which closes its connections at once.
   * The row and its history stay; to let it back, delete it and create it again.
   */
  async revoke(id: string): Promise<void> {
    const key = await this.machines.revokeCredential(id);
    if (key === undefined) throw new NotFoundException(`machine "${id}" not found`);
    if (key) await this.natsUsers.revoke(id, key, 'an operator revoked the machine');
  }

  /** The states the machine entered, newest first. */
  async stateChangesOf(caller: Principal, id: string, from: Date | undefined, limit: number): Promise<MachineStateChanges> {
    await this.require(id, caller);
    const changes = await this.machines.stateChanges(id, from, limit);
    return { machineId: id, changes: changes.map((c) => ({ ...c, at: new Date(c.at).toISOString() })) };
  }

  /** The machine, or 404; also 404 to a workspace token for a machine its work never ran on. */
  private async require(id: string, caller?: Principal): Promise<Machine> {
    const row = await this.machines.findById(id);
    const visible = !caller || caller.role === 'operator' || (await this.machines.idsUsedByWorkspace(caller.workspaceId)).includes(id);
    if (!row || !visible) throw new NotFoundException(`machine "${id}" not found`);
    return row;
  }
}
