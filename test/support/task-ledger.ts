import pg from 'pg';
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, testEnv, type TestSchema, uniqueName } from './isolation.js';
import { deleteNamespaces } from './nats.js';
import { freePort, ServiceProcess } from './processes.js';

/**
 * A gateway fed task events straight over JetStream: its own schema and namespace, a workspace
 * with one task queue (version 1), and the placements the scheduler would have made for it:
 * one container per machine, `placements` mapping machine id to container id.
 */
export class TaskLedger {
  private constructor(
    readonly schema: TestSchema,
    readonly ns: Namespace,
    readonly gateway: ServiceProcess,
    readonly port: number,
    readonly nc: NatsConnection,
    readonly messaging: Messaging,
    readonly db: pg.Client,
    readonly workspaceId: string,
    readonly deploymentId: string,
  ) {}

  static async start(label: string, placements: Record<string, string>): Promise<TaskLedger> {
    const schema = await createTestSchema(label);
    const ns = new Namespace(uniqueName(label));
    const port = await freePort();
    const gateway = new ServiceProcess(
      'gateway',
      testEnv(schema, ns.name, { HTTP_PORT: String(port), TASK_LEASE_WAIT_SECONDS: '5' }),
    ).start();
    await gateway.ready();
    const nc = await connectNats({ ...TEST_NATS, name: `${label}-test` });
    const db = new pg.Client({ connectionString: schema.url });
    await db.connect();
    await db.query(`SET search_path TO "${schema.schema}"`);
    const workspaceId = (await db.query(`INSERT INTO workspaces (name) VALUES ($1) RETURNING id`, [label])).rows[0].id;
    const deploymentId = (
      await db.query(
        `INSERT INTO deployments (workspace_id, name, kind, state, latest_version) VALUES ($1, 'q', 'task_queue', 'ready', 1) RETURNING id`,
        [workspaceId],
      )
    ).rows[0].id;
    const version = (
      await db.query(`INSERT INTO deployment_versions (deployment_id, version, spec) VALUES ($1, 1, '{}') RETURNING id`, [deploymentId])
    ).rows[0].id;
    for (const [machineId, containerId] of Object.entries(placements)) {
      await db.query(`INSERT INTO machines (id, pool, state) VALUES ($1, 'default', 'ready') ON CONFLICT DO NOTHING`, [machineId]);
      await db.query(
        `INSERT INTO containers (id, deployment_version_id, machine_id, state, requested) VALUES ($1, $2, $3, 'ready', '{}')`,
        [containerId, version, machineId],
      );
    }
    return new TaskLedger(schema, ns, gateway, port, nc, new Messaging(nc, ns), db, workspaceId, deploymentId);
  }

  /** A machine that joined but holds nothing of the queue. */
  async addMachine(machineId: string): Promise<void> {
    await this.db.query(`INSERT INTO machines (id, pool, state) VALUES ($1, 'default', 'ready')`, [machineId]);
  }

  /** A PENDING task of the queue (3 retries, 60 s timeout). */
  async task(): Promise<string> {
    const id = randomUUID();
    await this.db.query(
      `INSERT INTO tasks (id, workspace_id, deployment_id, state, payload, max_retries, timeout_seconds) VALUES ($1, $2, $3, 'PENDING', '{}', 3, 60)`,
      [id, this.workspaceId, this.deploymentId],
    );
    return id;
  }

  async row(id: string): Promise<{ state: string; attempts: number; result: unknown; error: string | null; machine_id: string | null }> {
    return (await this.db.query(`SELECT state, attempts, result, error, machine_id FROM tasks WHERE id = $1`, [id])).rows[0];
  }

  async stop(): Promise<void> {
    await this.db.end();
    await this.gateway.stop();
    await this.nc.close();
    await deleteNamespaces(this.ns.name);
    await this.schema.drop();
  }
}
