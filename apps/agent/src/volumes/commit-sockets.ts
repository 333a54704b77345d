import { Logger } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { AGENT_SOCKET_NAME } from '../containers/container-spec.js';
import type { VolumeMounts } from './volume-mounts.js';

/**
 * One Unix socket per container with a read-write volume, bound into it at AGENT_SOCKET_MOUNT:
 * `POST /volumes/commit` (every read-write mount) or `POST /volumes/<name>/commit` commits that
 * container's copies now (what `tern.volume.commit()` in the runners calls). The socket is the
 * container's identity: it can only ever commit its own mounts. A container has no other way to
 * the agent (its network cannot reach the host).
 */
export class CommitSockets {
  private readonly logger = new Logger('volumes');
  private readonly servers = new Map<string, Server>();

  constructor(
    private readonly root: string,
    private readonly volumes: VolumeMounts,
  ) {}

  /** Opens the container's socket; the directory to bind at AGENT_SOCKET_MOUNT. */
  async open(containerId: string): Promise<string> {
    const dir = join(this.root, containerId);
    await this.close(containerId);
    await mkdir(dir, { recursive: true, mode: 0o755 });
    const server = createServer((req, res) => {
      const match = req.method === 'POST' ? /^\/volumes\/(?:([a-z0-9][a-z0-9-]{0,62})\/)?commit$/.exec(req.url ?? '') : null;
      const answer = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      req.resume();
      if (!match) return answer(404, { message: 'POST /volumes/commit or /volumes/<name>/commit' });
      this.volumes.commit(containerId, match[1]).then(
        (volumes) =>
          Object.keys(volumes).length || !match[1]
            ? answer(200, { volumes })
            : answer(404, { message: `volume ${match[1]} is not mounted read-write in this container` }),
        (e: Error) => {
          this.logger.warn({ containerId }, `commit asked by container ${containerId} failed: ${e.message}`);
          answer(502, { message: e.message });
        },
      );
    });
    const path = join(dir, AGENT_SOCKET_NAME);
    // A Unix socket's address is at most 107 bytes, and a state directory deep in the filesystem
    // passes it (the path is cut short and the socket lands elsewhere): listen on a short name,
    // then move the socket into place (a connect finds it by its file, not by its address).
    const short = Buffer.byteLength(path) > 100 ? join(tmpdir(), `tern-sock-${randomBytes(6).toString('hex')}`) : path;
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(short, resolve));
    if (short !== path) await rename(short, path);
    // Any user in the container (user namespaces included) may connect.
    await chmod(path, 0o666);
    this.servers.set(containerId, server);
    return dir;
  }

  async close(containerId: string): Promise<void> {
    const server = this.servers.get(containerId);
    this.servers.delete(containerId);
    if (server) await new Promise((resolve) => server.close(resolve));
    await rm(join(this.root, containerId), { recursive: true, force: true });
  }
}
