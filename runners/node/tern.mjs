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
import { request } from 'node:http';

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
export default { volume };
