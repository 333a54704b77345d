import { readFileSync } from 'node:fs';
import { get as httpsGet } from 'node:https';
import { CONTROL_PLANE } from './paths.mjs';
import { dim, green, isTTY, yellow } from './log.mjs';
import { sleep } from './proc.mjs';

/**
 * GET <gateway>/health/ready: { httpStatus, body } or { error } when the gateway does not answer.
 * With `caFile` (a gateway over HTTPS with a private CA) node:https, trusting that CA only: these
 * scripts use builtins, and fetch cannot be given a CA.
 */
export async function fetchReady(gatewayUrl, timeoutMs = 3_000, caFile = undefined) {
  try {
    if (caFile) return await getJsonTrusting(`${gatewayUrl}/health/ready`, readFileSync(caFile), timeoutMs);
    const res = await fetch(`${gatewayUrl}/health/ready`, { signal: AbortSignal.timeout(timeoutMs) });
    const body = await res.json().catch(() => undefined);
    return { httpStatus: res.status, body };
  } catch (e) {
    return { error: e.cause?.code ?? e.code ?? e.name ?? String(e) };
  }
}

function getJsonTrusting(url, ca, timeoutMs) {
  return new Promise((resolve, reject) => {
    const req = httpsGet(url, { ca, timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        let body;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ httpStatus: res.statusCode, body });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

export function isReady(r, minAgents = 1) {
  return r?.body?.status === 'ok' && (r.body.agents?.length ?? 0) >= minAgents;
}

/** Names of what is not up yet according to a /health/ready answer (all of it when the gateway is silent). */
export function notUp(r, minAgents = 1) {
  if (!r?.body?.services) return [...CONTROL_PLANE, ...(minAgents ? ['agent'] : [])];
  const down = CONTROL_PLANE.filter((s) => r.body.services[s]?.status !== 'up');
  if ((r.body.agents?.length ?? 0) < minAgents) down.push('agent');
  return down;
}

export function progressLine(r, elapsedMs) {
  const secs = dim(`${Math.round(elapsedMs / 1000)}s`);
  if (!r?.body?.services) return `waiting for the gateway to answer… ${secs}`;
  const parts = CONTROL_PLANE.map((s) => (r.body.services[s]?.status === 'up' ? `${s} ${green('✔')}` : `${s} ${yellow('…')}`));
  const agents = r.body.agents?.length ?? 0;
  parts.push(`agents ${agents ? green(agents) : yellow(0)}`);
  return `${parts.join('  ')}  ${secs}`;
}

/**
 * Polls /health/ready until every control-plane service is up and `minAgents` agents answer,
 * showing progress (one rewritten line on a terminal, a line per change otherwise).
 * `abort()` returning a reason stops the wait early. Resolves { ok, last, reason }.
 */
export async function waitReady({ gatewayUrl, timeoutMs, minAgents = 1, abort = () => undefined, caFile }) {
  const t0 = Date.now();
  let last;
  let shown = '';
  const show = (line) => {
    if (isTTY) process.stdout.write(`\r\x1b[K  ${line}`);
    else if (line.replace(/\d+s/, '') !== shown.replace(/\d+s/, '')) console.log(`  ${line}`);
    shown = line;
  };
  try {
    while (Date.now() - t0 < timeoutMs) {
      const reason = abort();
      if (reason) return { ok: false, last, reason };
      last = await fetchReady(gatewayUrl, 3_000, caFile);
      show(progressLine(last, Date.now() - t0));
      if (isReady(last, minAgents)) return { ok: true, last };
      await sleep(500);
    }
    return { ok: false, last, reason: `not ready after ${Math.round(timeoutMs / 1000)}s` };
  } finally {
    if (isTTY && shown) process.stdout.write('\n');
  }
}
