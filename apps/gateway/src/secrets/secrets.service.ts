import { Inject, Injectable, NotFoundException, ServiceUnavailableException } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { type AgentContainerSecrets, type SecretSummary } from '#tern/contracts';
import { SecretsRepository } from '#tern/persistence';
import { SecretBox } from './secret-box.js';

/** A workspace's secrets: written and listed through the API, read in clear only by the control plane. */
@Injectable()
export class SecretsService {
  private readonly box?: SecretBox;

  constructor(
    @Inject(TERN_CONFIG) config: TernConfig,
    private readonly secrets: SecretsRepository,
  ) {
    if (config.secretsKey) this.box = new SecretBox(config.secretsKey);
  }

  async put(workspaceId: string, name: string, value: string): Promise<SecretSummary & { replaced: boolean }> {
    const { summary, replaced } = await this.secrets.put(
      workspaceId,
      name,
      this.sealer().seal(workspaceId, name, value),
      Buffer.byteLength(value),
    );
    return { ...view(summary), replaced };
  }

  async list(workspaceId: string): Promise<SecretSummary[]> {
    return (await this.secrets.list(workspaceId)).map(view);
  }

  async remove(workspaceId: string, name: string): Promise<void> {
    if (!(await this.secrets.remove(workspaceId, name))) throw notFound(name);
  }

  /** The value in clear, for the control plane's own use (a registry login); 404 when there is none. */
  async reveal(workspaceId: string, name: string): Promise<string> {
    const sealed = await this.secrets.sealedValue(workspaceId, name);
    if (sealed === undefined) throw notFound(name);
    return this.sealer().open(workspaceId, name, sealed);
  }

  /**
   * A starting container's secrets (its spec's `secrets:`) in clear, for its agent on `machineId`.
   * 404 when the container is not one placed there that is still starting, or a secret it names
   * is gone (the start then fails, saying which).
   */
  async envOfStartingContainer(machineId: string, containerId: string): Promise<AgentContainerSecrets> {
    const found = await this.secrets.ofStartingContainer(machineId, containerId);
    if (!found) throw new NotFoundException(`no container ${containerId} is starting on this machine`);
    const env: Record<string, string> = {};
    for (const { name, sealed } of found.secrets) {
      if (sealed === null)
        throw new NotFoundException(
          `secret "${name}" named by the deployment's secrets is no longer in the workspace (tern secret set ${name})`,
        );
      env[name] = this.sealer().open(found.workspaceId, name, sealed);
    }
    return { env };
  }

  private sealer(): SecretBox {
    if (!this.box)
      throw new ServiceUnavailableException(
        'secrets are off: the gateway has no SECRETS_KEY (npm run up makes one; else openssl rand -base64 32)',
      );
    return this.box;
  }
}

function notFound(name: string): NotFoundException {
  return new NotFoundException(`no secret "${name}" in this workspace (tern secret set ${name})`);
}

function view(s: { name: string; bytes: number; createdAt: Date; updatedAt: Date }): SecretSummary {
  return { name: s.name, bytes: s.bytes, createdAt: s.createdAt.toISOString(), updatedAt: s.updatedAt.toISOString() };
}
