// Tern's helpers for handler code (also on globalThis.tern in the Node runner):
//   import { volume } from '/tern/runners/node/tern.mjs';
//   await volume.commit();        // every read-write volume of this container
//   await volume.commit('data');  // one of them
// Resolves { volumes: { name: { outcome: 'committed' | 'unchanged', version, written, removed,
// overwritten, skipped } } }: `overwritten` names the files this commit replaced that another
// container had changed since; `skipped` what the copy holds that a volume does not keep (links,
// empty directories).
// The agent listens on a Unix socket bound into the container (TERN_AGENT_SOCKET); writes are
// also committed when the container stops.
//
// A handler that means another answer than 200 and JSON:
//   throw new tern.HTTPError(400, 'prompt is required');            // 400 {"error": "prompt is required"}
//   return new tern.Response({ id: 7 }, { status: 201, headers: { location: '/items/7' } });
// Any other error stays a 500. The runner knows both by a marker property.
import { request, STATUS_CODES } from 'node:http';

/** Thrown by a handler: answer `status` (400-599) with {"error": message}, or `body`, and `headers`. */
export class HTTPError extends Error {
  constructor(status, message, { headers, body } = {}) {
    if (!Number.isInteger(status) || status < 400 || status > 599)
      throw new RangeError(`tern.HTTPError: status must be a whole number from 400 to 599, not ${status}`);
    super(message || STATUS_CODES[status] || `HTTP ${status}`);
    this.name = 'HTTPError';
    this.status = status;
    this.headers = { ...(headers ?? {}) };
    this.body = body;
    this.ternHttpError = true;
  }
}

/** Returned by a handler: its status and headers; a Buffer or string as it is, an (async) iterator streamed, the rest JSON. */
export class Response {
  constructor(body, { status = 200, headers, mediaType } = {}) {
    if (!Number.isInteger(status) || status < 100 || status > 599)
      throw new RangeError(`tern.Response: status must be a whole number from 100 to 599, not ${status}`);
    this.body = body;
    this.status = status;
    this.headers = { ...(headers ?? {}) };
    this.mediaType = mediaType;
    this.ternResponse = true;
  }
}

function commit(name, { timeoutMs = 600_000 } = {}) {
  const socketPath = process.env.TERN_AGENT_SOCKET;
  if (!socketPath) {
    return Promise.reject(new Error('tern.volume.commit(): this container mounts no read-write volume (no TERN_AGENT_SOCKET)'));
  }
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, method: 'POST', path: name ? `/volumes/${name}/commit` : '/volumes/commit', timeout: timeoutMs },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let body = {};
          try {
            body = text ? JSON.parse(text) : {};
          } catch {
            body = { message: text };
          }
          if (res.statusCode === 200) resolve(body);
          else reject(new Error(`tern.volume.commit(): ${body.message ?? res.statusCode}`));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('tern.volume.commit(): timed out')));
    req.on('error', reject);
    req.end();
  });
}

export const volume = { commit };
export default { volume, HTTPError, Response };
