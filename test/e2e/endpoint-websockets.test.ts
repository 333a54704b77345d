import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../support/browser.js';
import { startStack, type Stack } from '../support/stack.js';
import { echo, WEBSOCKET_ECHO_SERVER } from '../support/websocket-echo.js';

let stack: Stack;
let browser: Browser | undefined;

const wsUrl = (path: string) => `${stack.gateway.replace(/^http/, 'ws')}${path}`;
const api = (method: string, path: string) =>
  fetch(`${stack.gateway}${path}`, { method, headers: { authorization: `Bearer ${stack.token}` } });

/** The HTTP status a WebSocket upgrade is refused with, and the refusal's message. */
function refusal(url: string, headers: Record<string, string> = {}, protocols?: string[]): Promise<{ status: number; message: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { headers });
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, message: String((JSON.parse(text) as { message: unknown }).message) }));
    });
    ws.on('open', () => reject(new Error(`${url} opened`)));
    ws.on('error', (e) => reject(e));
  });
}

async function ticketFor(name: string): Promise<string> {
  const res = await api('POST', `/api/v1/deployments/${name}/socket-tickets`);
  expect(res.status).toBe(201);
  const body = (await res.json()) as { ticket: string; expiresAt: string };
  expect(Date.parse(body.expiresAt) - Date.now()).toBeLessThanOrEqual(60_000);
  return body.ticket;
}

/** In Chromium: opens `url` (with `protocols`), sends `text`, resolves what came back and the protocol the server chose. */
async function fromChromium(url: string, text: string, protocols: string[] = []): Promise<{ answer: string; protocol: string }> {
  browser ??= await launchChromium();
  const page = await browser.newPage();
  try {
    // A page of the gateway's own origin, as a dashboard or app served beside the API would be.
    await page.goto(`${stack.gateway}/health/live`);
    // Evaluated in the page (a string: the tests compile without the DOM's types).
    return await page.evaluate<{ answer: string; protocol: string }>(`new Promise((resolve, reject) => {
      const ws = new WebSocket(${JSON.stringify(url)}, ${JSON.stringify(protocols)});
      ws.onopen = () => ws.send(${JSON.stringify(text)});
      ws.onmessage = (e) => { resolve({ answer: String(e.data), protocol: ws.protocol }); ws.close(); };
      ws.onerror = () => reject(new Error('the WebSocket failed'));
    })`);
  } finally {
    await page.close();
  }
}

/** WebSockets to an endpoint through the gateway and the agent, from `ws` and from a browser. */
describe('WebSockets on endpoints', () => {
  beforeAll(async () => {
    stack = await startStack('ws');
    const dir = stack.scratch('echo');
    writeFileSync(join(dir, 'echo.py'), WEBSOCKET_ECHO_SERVER);
    // The echo server answers any plain GET with 200, /health included.
    writeFileSync(
      join(dir, 'tern.yaml'),
      'name: echo\nkind: endpoint\ncommand: [sh, -c, \'exec python3 echo.py "$PORT"\']\nconcurrent_requests: 4\ncpu: 0.25\nmemory: 128Mi\n',
    );
    const deployed = await stack.tern('deploy', join(dir, 'tern.yaml'));
    expect(deployed.stdout).toContain('Deployed echo version 1');
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('echoes through /endpoint/<name>/… from the ws package with a bearer token, the path passed on', async () => {
    // Cold: the upgrade waits for a container as a request does.
    const answers = await echo(wsUrl('/endpoint/echo/chat?room=1'), { authorization: `Bearer ${stack.token}` }, [
      'hello',
      Buffer.from([0, 1, 2, 255]),
    ]);
    expect(answers).toEqual(['/chat?room=1 hello', Buffer.from([0, 1, 2, 255])]);
    const pinned = await echo(wsUrl('/endpoint/echo@1/v1/realtime'), { authorization: `Bearer ${stack.token}` }, ['pinned']);
    expect(pinned).toEqual(['/v1/realtime pinned']);
  }, 120_000);

  it('refuses a WebSocket without a credential, with a bad ticket, or for another deployment', async () => {
    expect(await refusal(wsUrl('/endpoint/echo/chat'))).toMatchObject({ status: 401, message: expect.stringMatching(/socket-tickets/) });
    expect(await refusal(wsUrl('/endpoint/echo/chat?tern_ticket=forged.x'))).toMatchObject({ status: 401 });
    expect(await refusal(wsUrl('/endpoint/nope/chat'), { authorization: `Bearer ${stack.token}` })).toMatchObject({ status: 404 });
    const ticket = await ticketFor('echo');
    // A ticket opens its own deployment's WebSockets only.
    const other = await refusal(wsUrl(`/endpoint/other/x?tern_ticket=${ticket}`));
    expect(other).toMatchObject({ status: 401, message: 'the ticket is for deployment "echo", not "other"' });
    // As the only subprotocol it would leave the browser's handshake without an answer.
    const alone = await refusal(wsUrl('/endpoint/echo/chat'), {}, [`tern.ticket.${ticket}`]);
    expect(alone).toMatchObject({ status: 400, message: expect.stringMatching(/offer your server's own subprotocol/) });
    expect((await api('POST', '/api/v1/deployments/nope/socket-tickets')).status).toBe(404);
  });

  it('echoes from Chromium with a ticket in the query or a subprotocol, which neither the server nor a log sees', async () => {
    const byQuery = await ticketFor('echo');
    const query = await fromChromium(wsUrl(`/endpoint/echo/live?lang=en&tern_ticket=${byQuery}`), 'from chromium');
    expect(query.answer).toBe('/live?lang=en from chromium');

    const byProtocol = await ticketFor('echo');
    const protocol = await fromChromium(wsUrl('/endpoint/echo/live'), 'by protocol', [`tern.ticket.${byProtocol}`, 'echo.v1']);
    // The server took the first protocol it was offered: the ticket was not among them.
    expect(protocol).toEqual({ answer: '/live by protocol', protocol: 'echo.v1' });

    const logs = join(String(stack.env.TERN_HOME), 'logs');
    for (const entry of readdirSync(logs, { withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const file = entry.name;
      const text = readFileSync(join(logs, file), 'utf8');
      expect({ file, leaks: text.includes(byQuery) || text.includes(byProtocol) }).toEqual({ file, leaks: false });
    }
  }, 120_000);
});
