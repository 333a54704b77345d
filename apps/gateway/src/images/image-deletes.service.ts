import { BadRequestException, ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import type { DeletedImage } from '#tern/contracts';
import { DeploymentsRepository, SandboxesRepository } from '#tern/persistence';
import { ImageError, parseRegistryRef, pinnedRef, type RegistryRef } from '#tern/runtime';
import type { Principal } from '../auth/principal.js';
import { workspaceBuilds } from '../registry-tokens/registry-rights.js';
import { RegistryImages } from './registry-images.js';

/**
 * Deleting an image from Tern's registry. A workspace's admin deletes its own builds
 * (`builds/<workspace id>/…`); anything else is not found to it, so a workspace never learns what
 * another holds. The operator deletes any image of the registry. An image that a deployment's
 * latest version or a live sandbox runs is refused (409, naming them): its containers would fail
 * their next pull.
 */
@Injectable()
export class ImageDeletes {
  constructor(
    private readonly registry: RegistryImages,
    private readonly deployments: DeploymentsRepository,
    private readonly sandboxes: SandboxesRepository,
  ) {}

  async delete(p: Principal, image: string): Promise<DeletedImage> {
    const ref = this.parse(image);
    const notFound = () => new NotFoundException(`image ${image} not found in workspace "${p.workspaceName}"`);
    if (p.role !== 'operator' && !ref.repository.startsWith(workspaceBuilds(p.workspaceId))) throw notFound();
    if (!this.registry.enabled || this.registry.host !== ref.registry)
      throw new BadRequestException(
        `ref: ${image} is not in Tern's registry${this.registry.enabled ? ` (${this.registry.host})` : ' (this installation has none: REGISTRY_URL)'}; only its images are deleted here`,
      );
    const digest = await this.registry.digestOf(ref.repository, ref.digest ?? ref.tag ?? 'latest');
    if (!digest) throw notFound();
    await this.refuseInUse(p, image, pinnedRef(ref, digest));
    if (!(await this.registry.deleteManifest(ref.repository, digest))) throw notFound();
    return { image, digest };
  }

  private parse(image: string): RegistryRef {
    try {
      return parseRegistryRef(image);
    } catch (e) {
      if (e instanceof ImageError) throw new BadRequestException(`ref: ${e.message}`);
      throw e;
    }
  }

  /** A workspace's admin hears only of its own users of the image; the operator of every one. */
  private async refuseInUse(p: Principal, image: string, pinned: string): Promise<void> {
    const mine = (u: { workspaceId: string }) => p.role === 'operator' || u.workspaceId === p.workspaceId;
    const [deployments, sandboxes] = await Promise.all([this.deployments.usingImage(pinned), this.sandboxes.liveUsingImage(pinned)]);
    const users = [
      ...deployments.filter(mine).map((d) => (p.role === 'operator' ? `deployment ${d.workspaceName}/${d.name}` : `deployment ${d.name}`)),
      ...sandboxes.filter(mine).map((s) => `sandbox ${s.id}`),
    ];
    if (users.length)
      throw new ConflictException(
        `image ${image} is in use by ${users.join(', ')}: deploy another image or delete the deployment, terminate the sandbox, then delete it`,
      );
  }
}
