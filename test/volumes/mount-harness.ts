import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import {
  AGENT_CONTAINER_START,
  AGENT_CONTAINER_STOP,
  CONTAINER_LOG_LINE,
  type ContainerLogLine,
  type ContainerStart,
  subjectFilter,
} from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { ContainersRepository, createDataSource } from '#tern/persistence';
import type { DataSource } from 'typeorm';
import { ADMIN, AgentProcess, removeStateDir, tempStateDir } from '../agent/harness.js';
import { client } from '../machines/harness.js';
import type { RunningGateway } from '../support/gateway.js';
import { TEST_NATS } from '../support/isolation.js';
import { waitFor } from '../support/processes.js';

/**
 * Writes WRITE's `path=text;…`, makes LINK's `path=target;…` links and MKDIR's directories, prints
 * HASH's sha256 and READ's files, overwrites the start of PATCH's `path=text` files, commits through
 * its agent socket with COMMIT, serves /health, exits after LIFETIME seconds.
 */
export const PROGRAM = `
import os, threading, time
from http.server import BaseHTTPRequestHandler, HTTPServer
for spec in filter(None, os.environ.get("WRITE", "").split(";")):
    path, text = spec.split("=", 1)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write(text)
for spec in filter(None, os.environ.get("LINK", "").split(";")):
    path, target = spec.split("=", 1)
    os.symlink(target, path)
for path in filter(None, os.environ.get("MKDIR", "").split(";")):
    os.makedirs(path, exist_ok=True)
for path in filter(None, os.environ.get("HASH", "").split(";")):
    import hashlib
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    print("sha256 " + path + ": " + digest.hexdigest(), flush=True)
for spec in filter(None, os.environ.get("PATCH", "").split(";")):
    path, text = spec.split("=", 1)
    with open(path, "r+b") as f:
        f.write(text.encode())
for path in filter(None, os.environ.get("READ", "").split(";")):
    print("read " + path + ": " + open(path, "rb").read().decode("latin1")[:64], flush=True)
if os.environ.get("COMMIT"):
    import socket
    agent = socket.socket(socket.AF_UNIX)
    agent.connect(os.environ["TERN_AGENT_SOCKET"])
    agent.sendall(b"POST /volumes/commit HTTP/1.0\\r\\nHost: agent\\r\\n\\r\\n")
    answer = b""
    while True:
        part = agent.recv(65536)
        if not part:
            break
        answer += part
    print("commit: " + answer.decode().split("\\r\\n\\r\\n", 1)[1], flush=True)
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = HTTPServer(("0.0.0.0", int(os.environ["PORT"])), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
time.sleep(float(os.environ.get("LIFETIME", "1")))
`;

export type MachineName = 'A' | 'B';

/**
 * Two real agents (machines A and B) joined to `gateway`, the container events and log lines they
 * send, and the steps of a volume test: deploy a spec mounting volumes, place a container on a
 * machine (as the scheduler records it) and start it, stop it, read a volume's file through the API.
 * Registers its beforeAll and afterAll where it is called.
 */
export function mountHarness(gateway: RunningGateway, machineOf: Record<MachineName, string>) {
  const h = {
    agents: {} as Record<MachineName, AgentProcess>,
    events: [] as { kind: string; data: Record<string, unknown> }[],
    logs: [] as ContainerLogLine[],
    db: undefined as unknown as DataSource,
    messaging: undefined as unknown as Messaging,
    containers: undefined as unknown as ContainersRepository,
    workspaceId: '',
    call: (...args: Parameters<ReturnType<typeof client>>) => client(gateway.base)(...args),
    kinds: (containerId: string) => h.events.filter((e) => e.data.containerId === containerId).map((e) => e.kind),
    linesOf: (containerId: string) => h.logs.filter((l) => l.containerId === containerId).map((l) => l.line),
    /** A deployment whose spec mounts `volumes`, as the gateway records it. */
    deploy: async (name: string, volumes: { name: string; mount_path: string; read_only?: boolean }[]) => {
      const made = await h.call('POST', '/api/v1/deployments', ADMIN, {
        name,
        kind: 'endpoint',
        command: ['python3', '-c', PROGRAM],
        volumes,
      });
      expect(made.status).toBe(201);
      const [row] = (await h.db.query(`SELECT id FROM deployment_versions WHERE deployment_id = $1`, [made.body.deploymentId])) as {
        id: string;
      }[];
      versions[name] = { deploymentId: made.body.deploymentId as string, versionId: row.id };
    },
    /** Places the container on the machine (as the scheduler records it) and sends the agent its start. */
    start: async (
      machine: MachineName,
      containerId: string,
      deployment: string,
      volumes: ContainerStart['volumes'],
      env: Record<string, string>,
    ) => {
      await h.containers.insertScheduled({
        id: containerId,
        deploymentVersionId: versions[deployment].versionId,
        machineId: machineOf[machine],
        reason: 'test placement',
        requested: { cpuMillicores: 250, memoryBytes: 256 * 2 ** 20, gpuCount: 0 },
      });
      const command: ContainerStart = {
        containerId,
        deploymentId: versions[deployment].deploymentId,
        deploymentVersion: 1,
        workspaceId: h.workspaceId,
        deploymentKind: 'endpoint',
        image: 'host',
        command: ['python3', '-c', PROGRAM],
        env,
        resources: { cpuMillicores: 250, memoryBytes: 256 * 2 ** 20, gpuCount: 0 },
        volumes,
        ports: [8000],
        workers: 1,
        concurrency: 1,
        startupTimeoutSeconds: 60,
        requestedAt: new Date().toISOString(),
      };
      expect(await h.messaging.request(AGENT_CONTAINER_START, command, { tokens: [machineOf[machine]] })).toEqual({ accepted: true });
    },
    stop: async (machine: MachineName, containerId: string) => {
      await h.messaging.request(AGENT_CONTAINER_STOP, { containerId, graceSeconds: 1, reason: 'test' }, { tokens: [machineOf[machine]] });
      await waitFor(`${containerId} stopped`, async () => h.kinds(containerId).includes('stopped'), 90_000);
    },
    fileOf: async (volume: string, path: string) => {
      const res = await fetch(`${gateway.base}/api/v1/volumes/${volume}/files?path=${path}`, {
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      return res.status === 200 ? Buffer.from(await res.arrayBuffer()) : res.status;
    },
    /** The first chunk's digest of a file, as the database records it. */
    firstChunkOf: async (volume: string, path: string): Promise<string> => {
      const [row] = (await h.db.query(
        `SELECT f.chunks[1] AS hex FROM volume_files f JOIN volumes v ON v.id = f.volume_id WHERE v.name = $1 AND f.path = $2`,
        [volume, path],
      )) as { hex: string }[];
      return row.hex;
    },
  };
  const versions: Record<string, { deploymentId: string; versionId: string }> = {};
  const subs: Subscription[] = [];
  let nc: NatsConnection | undefined;

  beforeAll(async () => {
    h.db = await createDataSource({ url: gateway.schema.url, schema: gateway.schema.schema, runMigrations: false }).initialize();
    h.containers = new ContainersRepository(h.db);
    h.workspaceId = (await h.call('GET', '/api/v1/workspace', ADMIN)).body.id as string;
    nc = await connectNats({ ...TEST_NATS, name: 'volume-mounts-test' });
    h.messaging = new Messaging(nc, new Namespace(gateway.namespace));
    subs.push(
      nc.subscribe(`${gateway.namespace}.container.*.*.v1`, {
        callback: (_e, m) => void h.events.push({ kind: m.subject.split('.').at(-2)!, data: m.json() }),
      }),
      nc.subscribe(h.messaging.ns.subject(subjectFilter(CONTAINER_LOG_LINE, undefined, undefined, undefined)), {
        callback: (_e, m) => void h.logs.push(m.json<ContainerLogLine>()),
      }),
    );
    for (const m of ['A', 'B'] as const) {
      h.agents[m] = AgentProcess.forPlane({ base: gateway.base } as never, { MACHINE_ID: machineOf[m] }, tempStateDir());
      h.agents[m].start();
    }
    await Promise.all(Object.values(h.agents).map((a) => a.joined(120_000)));
  }, 300_000);

  afterAll(async () => {
    subs.forEach((s) => s.unsubscribe());
    for (const a of Object.values(h.agents)) await a?.stop(30_000);
    await nc?.close();
    await h.db?.destroy();
    for (const a of Object.values(h.agents)) if (a) removeStateDir(a.stateDir);
  });
  return h;
}
