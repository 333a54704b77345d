import { createTestSchema, type TestSchema, testEnv, uniqueName } from './isolation.js';
import { deleteNamespaces } from './nats.js';
import { freePort, ServiceProcess } from './processes.js';

/** A gateway process of the test file's own; its fields are set once the file's first beforeAll ran. */
export interface RunningGateway {
  readonly port: number;
  /** `http://127.0.0.1:<port>` */
  readonly base: string;
  readonly schema: TestSchema;
  /** Its NATS namespace. */
  readonly namespace: string;
  readonly process: ServiceProcess;
}

/**
 * Starts a real gateway (built, from dist/) on a free port with its own Postgres schema and NATS
 * namespace and `token` as its bootstrap operator token (and `env` over the test defaults), in a beforeAll registered here (so
 * before the file's own); stops it and removes both after the file's tests.
 */
export function runningGateway(label: string, token: string, env: Record<string, string> = {}): RunningGateway {
  const handle = {} as { -readonly [K in keyof RunningGateway]: RunningGateway[K] };
  let namespace: string | undefined;
  beforeAll(async () => {
    handle.schema = await createTestSchema(label);
    namespace = uniqueName(label);
    handle.namespace = namespace;
    handle.port = await freePort();
    handle.base = `http://127.0.0.1:${handle.port}`;
    handle.process = new ServiceProcess(
      'gateway',
      testEnv(handle.schema, namespace, { HTTP_PORT: String(handle.port), BOOTSTRAP_ADMIN_TOKEN: token, ...env }),
    ).start();
    await handle.process.ready();
  });
  afterAll(async () => {
    await handle.process?.stop();
    await handle.schema?.drop();
    if (namespace) await deleteNamespaces(namespace);
  });
  return handle;
}
