import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type ContainerResources } from '../entities/container.entity.js';
import { Sandbox, type SandboxState } from '../entities/sandbox.entity.js';
import { TransactionalRepository } from './transactional.repository.js';

export interface NewSandbox {
  id: string;
  workspaceId: string;
  machineId: string;
  pool: string;
  spec: Record<string, unknown>;
  requested: ContainerResources;
  timeoutSeconds: number;
  idleTimeoutSeconds: number | null;
}

/** A sandbox past its lifetime or idle timeout, or on a machine that went offline. */
export interface EndingSandbox {
  id: string;
  workspaceId: string;
  machineId: string | null;
  state: SandboxState;
  reason: string;
  requested: ContainerResources;
  /** Null when it ended before it ran (nothing to meter). */
  startedAt: Date | null;
  endedAt: Date;
}

const SELECT = `id, workspace_id AS "workspaceId", machine_id AS "machineId", pool, state, state_reason AS "stateReason", spec, requested,
  timeout_seconds AS "timeoutSeconds", idle_timeout_seconds AS "idleTimeoutSeconds", ports, public_ports AS "publicPorts", created_at AS "createdAt",
  started_at AS "startedAt", active_at AS "activeAt", ended_at AS "endedAt"`;

/** Every statement on sandboxes. Ends are conditional updates: a sandbox ends once. */
@Injectable()
export class SandboxesRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  /** The row of a sandbox just placed on a machine (in the placement's transaction). */
  async insertPlaced(s: NewSandbox): Promise<void> {
    await this.rows(
      `INSERT INTO sandboxes (id, workspace_id, machine_id, pool, state, spec, requested, timeout_seconds, idle_timeout_seconds)
       VALUES ($1, $2, $3, $4, 'placing', $5, $6, $7, $8)`,
      [s.id, s.workspaceId, s.machineId, s.pool, s.spec, s.requested, s.timeoutSeconds, s.idleTimeoutSeconds],
    );
  }

  /** placing → running; undefined when it ended meanwhile. */
  async markRunning(id: string): Promise<Sandbox | undefined> {
    const [row] = await this.rows<Sandbox>(
      `UPDATE sandboxes SET state = 'running', started_at = now(), active_at = now() WHERE id = $1 AND state = 'placing' RETURNING ${SELECT}`,
      [id],
    );
    return row;
  }

  /** Ends a live sandbox (placing or running) in `state`; undefined when it had ended already. */
  async end(id: string, state: Exclude<SandboxState, 'placing' | 'running'>, reason: string): Promise<EndingSandbox | undefined> {
    const [row] = await this.rows<EndingSandbox>(
      `UPDATE sandboxes SET state = $2, state_reason = $3, ended_at = now() WHERE id = $1 AND state IN ('placing', 'running')
       RETURNING id, workspace_id AS "workspaceId", machine_id AS "machineId", state, state_reason AS reason, requested,
         started_at AS "startedAt", ended_at AS "endedAt"`,
      [id, state, reason],
    );
    return row;
  }

  /** The workspace's sandbox; another workspace's is as unknown as a missing one. */
  async findOfWorkspace(workspaceId: string, id: string): Promise<Sandbox | undefined> {
    const [row] = await this.rows<Sandbox>(`SELECT ${SELECT} FROM sandboxes WHERE id = $1 AND workspace_id = $2`, [id, workspaceId]);
    return row;
  }

  /** Newest first; `live` keeps only placing and running ones. */
  listOfWorkspace(workspaceId: string, live: boolean, limit: number): Promise<Sandbox[]> {
    return this.rows<Sandbox>(
      `SELECT ${SELECT} FROM sandboxes WHERE workspace_id = $1 AND ($2::boolean IS FALSE OR state IN ('placing', 'running'))
       ORDER BY created_at DESC LIMIT $3`,
      [workspaceId, live, limit],
    );
  }

  /** The live (placing or running) sandboxes whose image is `image` (a pinned reference). */
  liveUsingImage(image: string): Promise<{ id: string; workspaceId: string }[]> {
    return this.rows(
      `SELECT id, workspace_id AS "workspaceId" FROM sandboxes WHERE state IN ('placing', 'running') AND spec->>'image' = $1 ORDER BY id`,
      [image],
    );
  }

  /** Exposes a port of a running sandbox (again: nothing changes); undefined when it is not running. */
  async exposePort(id: string, port: number): Promise<number[] | undefined> {
    const [row] = await this.rows<{ ports: number[] }>(
      `UPDATE sandboxes SET ports = CASE WHEN $2 = ANY(ports) THEN ports ELSE array_append(ports, $2) END
       WHERE id = $1 AND state = 'running' RETURNING ports`,
      [id, port],
    );
    return row?.ports;
  }

  /** Makes an exposed port public under `token` (a port public already keeps its token); undefined when not running. */
  async makePortPublic(id: string, port: number, token: string): Promise<Record<string, number> | undefined> {
    const [row] = await this.rows<{ publicPorts: Record<string, number> }>(
      `UPDATE sandboxes SET public_ports = CASE
           WHEN EXISTS (SELECT 1 FROM jsonb_each(public_ports) e WHERE e.value = to_jsonb($2::integer)) THEN public_ports
           ELSE public_ports || jsonb_build_object($3::text, $2::integer) END
       WHERE id = $1 AND state = 'running' RETURNING public_ports AS "publicPorts"`,
      [id, port, token],
    );
    return row?.publicPorts;
  }

  /** The running sandbox whose public port `token` names, whatever its workspace (the token is the credential). */
  async findByPublicToken(token: string): Promise<Sandbox | undefined> {
    const [row] = await this.rows<Sandbox>(`SELECT ${SELECT} FROM sandboxes WHERE state = 'running' AND public_ports ? $1`, [token]);
    return row;
  }

  /** A call reached the sandbox: its idle timeout starts again. false when it is not running. */
  async touch(id: string): Promise<boolean> {
    const rows = await this.rows(`UPDATE sandboxes SET active_at = now() WHERE id = $1 AND state = 'running' RETURNING id`, [id]);
    return rows.length > 0;
  }

  /**
   * Running sandboxes to end now: past their lifetime (from creation), idle past their idle
   * timeout, or on a machine that is offline or gone. Ended here in one statement, so of two
   * sweepers only one gets each row.
   */
  endOverdue(): Promise<EndingSandbox[]> {
    return this.rows<EndingSandbox>(
      `WITH due AS (
         SELECT s.id,
           CASE
             WHEN m.id IS NULL OR m.state = 'offline' THEN 'lost'
             ELSE 'terminated'
           END AS state,
           CASE
             WHEN m.id IS NULL THEN 'machine removed'
             WHEN m.state = 'offline' THEN 'machine ' || m.id || ' went offline'
             WHEN s.created_at + make_interval(secs => s.timeout_seconds) <= now() THEN 'lifetime of ' || s.timeout_seconds || ' s reached'
             ELSE 'idle for ' || s.idle_timeout_seconds || ' s'
           END AS reason
         FROM sandboxes s LEFT JOIN machines m ON m.id = s.machine_id
         WHERE s.state IN ('placing', 'running')
           AND (m.id IS NULL OR m.state = 'offline'
             OR s.created_at + make_interval(secs => s.timeout_seconds) <= now()
             OR (s.state = 'running' AND s.idle_timeout_seconds IS NOT NULL AND s.active_at + make_interval(secs => s.idle_timeout_seconds) <= now()))
         FOR UPDATE OF s SKIP LOCKED
       )
       UPDATE sandboxes s SET state = due.state, state_reason = due.reason, ended_at = now()
       FROM due WHERE s.id = due.id
       RETURNING s.id, s.workspace_id AS "workspaceId", s.machine_id AS "machineId", s.state, s.state_reason AS reason, s.requested,
         s.started_at AS "startedAt", s.ended_at AS "endedAt"`,
    );
  }
}
