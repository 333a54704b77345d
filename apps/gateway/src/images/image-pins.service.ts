import { BadRequestException, Inject, Injectable, NotFoundException } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import {
  ImageError,
  parseRegistryRef,
  pinnedRef,
  type RegistryAccess,
  type RegistryRef,
  resolveRegistryDigest,
  skopeoCopy,
} from '#tern/runtime';
import { RegistryTokens } from '../registry-tokens/registry-tokens.service.js';
import { BUILD_REPOSITORIES, workspaceBuilds } from '../registry-tokens/registry-rights.js';
import { SecretsService } from '../secrets/secrets.service.js';
import { ownRegistryAccess } from './registry-users.js';

/** Where Tern's registry keeps copies of images pulled with a workspace's credentials. */
const MIRROR = 'mirror/';

/** An image in another registry, reached with a workspace secret holding `<username>:<password>`. */
export interface RegistrySecretRef {
  workspaceId: string;
  secret: string;
}

/**
 * Pins a deployment's registry image to the digest its tag names now, so that every container
 * of the version runs the same bytes and agents pull by digest. Asking the registry at deploy
 * time is also where an unreachable registry, a wrong credential or a missing image fails the
 * deploy, with the reference and the registry's answer, instead of a container start later.
 *
 * An image behind a workspace's registry credentials (`registry_secret:`) is copied, by digest,
 * into Tern's registry under `mirror/`, and the version runs the copy: the credentials stay in
 * the control plane, and machines (strangers' computers) pull the copy with their own tokens.
 */
@Injectable()
export class ImagePins {
  constructor(
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
    private readonly registryTokens: RegistryTokens,
    private readonly secrets: SecretsService,
  ) {}

  /** `host` stays `host`; a registry reference becomes `host/repo@sha256:…`. Throws a 400 naming the reference. */
  async pin(image: string, workspaceId: string, credentials?: RegistrySecretRef): Promise<string> {
    if (image === 'host') {
      if (credentials) throw new BadRequestException(['registry_secret: only an image in a registry takes registry credentials']);
      return image;
    }
    try {
      if (credentials) {
        const ref = parseRegistryRef(image);
        this.refuseForeign(image, ref, workspaceId);
        return await this.mirror(image, ref, this.config.registry?.host === ref.registry, credentials);
      }
      return await this.resolve(image, workspaceId);
    } catch (e) {
      if (e instanceof ImageError) throw new BadRequestException([`image: ${e.message}`]);
      throw e;
    }
  }

  /**
   * The workspace's registry image pinned to the digest its reference names now, after the one
   * ownership rule every request that names an image goes through (deploy, sandbox, snapshot,
   * a build's base): another workspace's build or Tern's mirror of another registry is refused.
   * Throws ImageError, for the caller to answer 400 under its own field name.
   */
  async resolve(image: string, workspaceId: string): Promise<string> {
    const ref = parseRegistryRef(image);
    this.refuseForeign(image, ref, workspaceId);
    const digest = await resolveRegistryDigest(image, this.ownAccess(ref.repository, ['pull']));
    if (ref.digest && digest !== ref.digest)
      throw new ImageError(image, `the registry holds manifest ${digest} under this reference, not ${ref.digest}`);
    return pinnedRef(ref, digest);
  }

  /**
   * Whether a pinned image is private to a workspace: one of its builds (snapshots included) or
   * Tern's copy of an image pulled with its credentials. A machine's owner can read such an image,
   * so it asks for verified machines (libs/placement needsVerifiedMachine).
   */
  isPrivate(pinned: string): boolean {
    if (pinned === 'host') return false;
    const ref = parseRegistryRef(pinned);
    return this.config.registry?.host === ref.registry && (ref.repository.startsWith(MIRROR) || BUILD_REPOSITORIES.test(ref.repository));
  }

  /** The gateway reads every repository of Tern's registry: what a workspace may name is decided here. */
  private refuseForeign(image: string, ref: RegistryRef, workspaceId: string): void {
    if (this.config.registry?.host !== ref.registry) return;
    if (ref.repository.startsWith(MIRROR))
      throw new ImageError(
        image,
        `${MIRROR} holds Tern's copies of images from other registries: name the original image (with registry_secret)`,
      );
    if (BUILD_REPOSITORIES.test(ref.repository) && !ref.repository.startsWith(workspaceBuilds(workspaceId)))
      throw new ImageError(image, `builds/ holds each workspace's own builds under ${workspaceBuilds(workspaceId)}: name one of yours`);
  }

  /** Resolves the image with the workspace's credentials and copies it by digest into `mirror/`. */
  private async mirror(image: string, ref: RegistryRef, own: boolean, from: RegistrySecretRef): Promise<string> {
    if (own) throw new BadRequestException([`registry_secret: ${ref.registry} is Tern's own registry, which needs no secret`]);
    if (!this.config.registry)
      throw new BadRequestException([
        "registry_secret: this installation has no registry of its own to copy the image into (REGISTRY_URL), and machines never get a workspace's credentials",
      ]);
    const source: RegistryAccess = { host: ref.registry, insecure: onLoopback(ref.registry), ...(await this.login(from)) };
    const digest = await resolveRegistryDigest(image, [source]);
    if (ref.digest && digest !== ref.digest)
      throw new ImageError(image, `the registry holds manifest ${digest} under this reference, not ${ref.digest}`);
    const repository = `${MIRROR}${ref.registry
      .toLowerCase()
      .replace(/[^a-z0-9.]+/g, '-')
      .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '')}/${ref.repository}`;
    const target = `${this.config.registry.host}/${repository}`;
    const copied = await skopeoCopy(image, `docker://${pinnedRef(ref, digest)}`, `docker://${target}:${digest.replace(':', '-')}`, [
      source,
      ...this.ownAccess(repository, ['pull', 'push']),
    ]);
    return `${target}@${copied}`;
  }

  /** The secret's `<username>:<password>`; a 400 naming the field when it is missing or malformed. */
  private async login(from: RegistrySecretRef): Promise<{ username: string; password: string }> {
    let value: string;
    try {
      value = await this.secrets.reveal(from.workspaceId, from.secret);
    } catch (e) {
      if (e instanceof NotFoundException) throw new BadRequestException([`registry_secret: ${e.message}`]);
      throw e;
    }
    const colon = value.indexOf(':');
    if (colon <= 0) throw new BadRequestException([`registry_secret: secret "${from.secret}" must hold <username>:<password>`]);
    return { username: value.slice(0, colon), password: value.slice(colon + 1) };
  }

  private ownAccess(repository: string, actions: ('pull' | 'push')[]): RegistryAccess[] {
    return ownRegistryAccess(this.config, this.registryTokens, [{ repository, actions }]);
  }
}

/** Plain HTTP is for a registry on this machine only (a test's, a developer's). */
function onLoopback(host: string): boolean {
  const name = host.replace(/:\d+$/, '');
  return name === 'localhost' || name === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(name);
}
