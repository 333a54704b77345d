import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVICE_NAMES } from '#tern/config';
import { createTestSchema, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { agentNetworkEnv, removeAgentNetwork } from '../support/agent-network.js';

const ADMIN = `tern_${'s'.repeat(43)}`;

interface Health {
  status: string;
  services: Record<string, { status: string }>;
  agents: { machineId: string; pool: string }[];
}

/** All six services as separate processes, as `npm run up` runs them. */
describe('system health across the six services', () => {
  let schema: TestSchema;
  let namespace: string;
  let base: string;
  let agentState: string;
  const processes = new Map<string, ServiceProcess>();

  const health = async (): Promise<{ code: number; body: Health }> => {
    const res = await fetch(`${base}/health/ready`);
    return { code: res.status, body: (await res.json()) as Health };
  };

  beforeAll(async () => {
    schema = await createTestSchema('sys');
    agentState = mkdtempSync(join(tmpdir(), 'tern-sys-agent-'));
    namespace = uniqueName('sys');
    for (const name of SERVICE_NAMES) {
      const port = await freePort();
      if (name === 'gateway') base = `http://127.0.0.1:${port}`;
      const env: Record<string, string> = testEnv(schema, namespace, {
        HTTP_PORT: name === 'agent' ? '0' : String(port),
        MACHINE_ID: 'local-1',
        POOL: 'default',
      });
      // The agent learns NATS from its registration with the gateway, as `npm run up` runs it.
      if (name === 'gateway') env.BOOTSTRAP_ADMIN_TOKEN = ADMIN;
      if (name === 'agent')
        Object.assign(env, {
          AGENT_GATEWAY_URL: base,
          AGENT_TOKEN: ADMIN,
          AGENT_STATE_DIR: agentState,
          AGENT_DASHBOARD: 'off',
          ...agentNetworkEnv(agentState),
        });
      processes.set(name, new ServiceProcess(name, env).start());
    }
    await Promise.all([...processes.values()].map((p) => p.ready(90_000)));
  }, 120_000);

  afterAll(async () => {
    await Promise.all([...processes.values()].map((p) => p.stop()));
    await schema?.drop();
    await deleteNamespaces(namespace);
    removeAgentNetwork(agentState);
    rmSync(agentState, { recursive: true, force: true });
  });

  it('reports every service up and the agent connected', async () => {
    const { code, body } = await waitFor('all up', async () => {
      const h = await health();
      return h.code === 200 ? h : undefined;
    });
    expect(code).toBe(200);
    expect(Object.fromEntries(Object.entries(body.services).map(([k, v]) => [k, v.status]))).toEqual({
      gateway: 'up',
      scheduler: 'up',
      autoscaler: 'up',
      metering: 'up',
      reputation: 'up',
    });
    expect(body.agents).toEqual([expect.objectContaining({ machineId: 'local-1', pool: 'default' })]);
  });

  it('reports a killed service down within 10 s, and up again once restarted', async () => {
    for (const name of ['metering', 'agent'] as const) {
      const victim = processes.get(name)!;
      await victim.kill('SIGKILL');
      const killedAt = Date.now();
      await waitFor(
        `${name} reported down`,
        async () => {
          const h = await health();
          return name === 'agent' ? h.body.agents.length === 0 : h.body.services[name].status === 'down' && h.code === 503;
        },
        10_000,
      );
      expect(Date.now() - killedAt).toBeLessThan(10_000);

      const again = new ServiceProcess(name, victim.env).start();
      processes.set(name, again);
      await again.ready();
      await waitFor(`${name} reported up`, async () => {
        const h = await health();
        return h.code === 200 && h.body.agents.length === 1;
      });
    }
  });

  it('shuts down cleanly on SIGTERM', async () => {
    const autoscaler = processes.get('autoscaler')!;
    await autoscaler.stop();
    expect(autoscaler.records().map((r) => r.msg)).toEqual(
      expect.arrayContaining(['shutting down on SIGTERM: leaving the service registry', 'NATS connection drained']),
    );
    await waitFor('autoscaler reported down', async () => (await health()).body.services.autoscaler.status === 'down');
  });
});
