import { join } from 'node:path';
import { type ContainerStart } from '#tern/contracts';
import { CodeBundleError, CodeBundles } from '../code/code-bundles.js';
import { findPythonSdkDir, findRunnersDir } from '../code/runners-dir.js';
import { type GatewayAccess } from '../gateway-data.js';
import { CommitSockets } from '../volumes/commit-sockets.js';
import { type VolumeMounts } from '../volumes/volume-mounts.js';
import { type AgentMounts } from './container-spec.js';

/**
 * The host directories a container is given: its code bundle, its volumes (with the socket that
 * commits them, for writable ones) and, for a handler, Tern's runners.
 */
export class ContainerMounts {
  private readonly code: CodeBundles;
  private readonly commitSockets: CommitSockets;
  private readonly runnersDir = findRunnersDir();
  private readonly pythonSdkDir = findPythonSdkDir(this.runnersDir);

  constructor(
    stateDir: string,
    private readonly volumes: VolumeMounts,
    gatewayAccess: () => GatewayAccess,
  ) {
    this.code = new CodeBundles(join(stateDir, 'code'), gatewayAccess);
    this.commitSockets = new CommitSockets(join(stateDir, 'volumes', 'sockets'), volumes);
  }

  /** What a start needs: the code bundle is ContainerStart.code, or a TERN_CODE env for commands that predate the field. */
  async prepare(cmd: ContainerStart): Promise<AgentMounts> {
    const digest = cmd.code ?? cmd.env.TERN_CODE;
    const mounts: AgentMounts = {};
    if (digest) mounts.codeDir = await this.code.ensure(digest);
    if (cmd.volumes.length) mounts.volumeDirs = await this.volumes.mount(cmd);
    if (cmd.volumes.some((v) => !v.readOnly)) mounts.agentSocketDir = await this.commitSockets.open(cmd.containerId);
    if (cmd.handler && !cmd.command?.length) {
      if (!this.runnersDir)
        throw new CodeBundleError(
          `cannot run handler "${cmd.handler}": Tern's runners are not installed with this agent (set AGENT_RUNNERS_DIR)`,
        );
      mounts.runnersDir = this.runnersDir;
      mounts.pythonSdkDir = this.pythonSdkDir;
    }
    return mounts;
  }

  /** Closes a container's commit socket: no commit is taken from it after this. */
  closeSocket(containerId: string): Promise<void> {
    return this.commitSockets.close(containerId);
  }
}
