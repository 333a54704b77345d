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

/** A gateway's answer in a test: its status, its text, and its body (the JSON parsed; otherwise the text, as an NDJSON stream's). */
export interface GatewayAnswer {
  status: number;
  text: string;
  body: any; // each test reads the fields its route answers
}

/**
 * `method path` on the gateway at `base` with `token`: a Buffer body sent as it is (as
 * `contentType`), any other as JSON.
 */
export async function callGateway(
  base: string,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  { contentType = 'application/json', timeoutMs = 30_000 }: { contentType?: string; timeoutMs?: number } = {},
): Promise<GatewayAnswer> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': contentType } : {}) },
    body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let parsed: unknown = text || undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Empty, or not JSON (an NDJSON stream): kept as text.
  }
  return { status: res.status, text, body: parsed };
}
