import { BadRequestException, Inject, Injectable, NotFoundException, UnauthorizedException } from '@nestjs/common';
import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { ContainersRepository } from '#tern/persistence';
import { MachineAuthService } from '../machine-registration/machine-auth.service.js';
import { registryRights, type RegistryPrincipal } from './registry-rights.js';
import { grantAccess, parseScopes, type RegistryTokenSigner, signRegistryToken } from './registry-token.js';

/** Actions on one repository of Tern's registry. */
export interface RepositoryGrant {
  readonly repository: string;
  /** `delete`: the control plane's own, removing a volume's old version manifests or a deleted image; never a caller's. */
  readonly actions: readonly ('pull' | 'push' | 'delete')[];
}

/** The token-auth answer (both names: Docker reads `token`, OAuth2 clients `access_token`). */
export interface RegistryTokenResponse {
  token: string;
  access_token: string;
  expires_in: number;
  issued_at: string;
}

const CREDENTIALS =
  'log in with a machine token (the agent does) or an API token as the password (any user name), e.g. skopeo --creds tern:$TERN_TOKEN';

/**
 * The registry's token service: who the caller is (their machine token or API token, sent as the
 * password of Basic auth, as registry clients do), what they may do (registryRights), a short-lived
 * token saying so. The registry checks the token's signature; it never sees the caller's secret.
 */
@Injectable()
export class RegistryTokens {
  private readonly signer?: RegistryTokenSigner;
  private readonly host?: string;
  private readonly builderPools: readonly string[] = [];

  constructor(
    @Inject(TERN_CONFIG) config: TernConfig,
    private readonly machineAuth: MachineAuthService,
    private readonly containers: ContainersRepository,
  ) {
    const token = config.registry?.token;
    if (!token) return;
    this.host = config.registry!.host;
    this.builderPools = token.builderPools;
    this.signer = { key: loadSigningKey(token.keyFile), issuer: token.issuer, service: token.service, ttlSeconds: token.ttlSeconds };
  }

  /** Whether the registry takes the gateway's tokens (else machines get static users, if any). */
  get enabled(): boolean {
    return this.signer !== undefined;
  }

  async issue(authorization: string | undefined, service: string, scopes: readonly string[]): Promise<RegistryTokenResponse> {
    const signer = this.signer;
    if (!signer)
      throw new NotFoundException(
        "this installation's registry does not take tokens from the gateway (REGISTRY_TOKEN_KEY_FILE is not set)",
      );
    if (service !== signer.service) throw new BadRequestException(`service "${service}" is not this registry's ("${signer.service}")`);
    let requested;
    try {
      requested = parseScopes(scopes);
    } catch (e) {
      throw new BadRequestException((e as Error).message);
    }
    const { subject, principal } = await this.identify(authorization);
    const access = await grantAccess(requested, registryRights(principal));
    return this.answer(signRegistryToken(signer, subject, access));
  }

  /**
   * A token for the control plane's own work on these repositories: pinning a tag to its digest
   * (pull), copying an image from behind a workspace's credentials into `mirror/` (push), one
   * build's base and target, handed to the builder that runs it (pull; push).
   */
  controlPlaneToken(grants: readonly RepositoryGrant[]): string | undefined {
    return this.tokenFor('tern-gateway', grants)?.token;
  }

  /**
   * A token for `subject` with exactly `grants`, for a caller the gateway has already checked
   * (a machine's volume grant: pull of a volume mounted by a container placed on it, push when
   * the mount is read-write). Undefined when the registry takes no tokens from the gateway.
   */
  tokenFor(subject: string, grants: readonly RepositoryGrant[]): { token: string; expiresIn: number } | undefined {
    if (!this.signer) return undefined;
    return signRegistryToken(
      this.signer,
      subject,
      grants.map((g) => ({ type: 'repository', name: g.repository, actions: [...g.actions] })),
    );
  }

  /** A token for the control plane to list every repository (`registry:catalog:*`); undefined without token auth. */
  catalogToken(): string | undefined {
    if (!this.signer) return undefined;
    return signRegistryToken(this.signer, 'tern-gateway', [{ type: 'registry', name: 'catalog', actions: ['*'] }]).token;
  }

  private answer(t: { token: string; expiresIn: number; issuedAt: string }): RegistryTokenResponse {
    return { token: t.token, access_token: t.token, expires_in: t.expiresIn, issued_at: t.issuedAt };
  }

  private async identify(authorization: string | undefined): Promise<{ subject: string; principal: RegistryPrincipal }> {
    const secret = secretOf(authorization);
    const caller = await this.machineAuth.identify(`Bearer ${secret}`);
    if (caller.kind === 'join-token') throw new UnauthorizedException(`a join token is good for registering only; ${CREDENTIALS}`);
    if (caller.kind === 'api-token') {
      const { principal } = caller;
      return {
        subject: `token:${principal.tokenId}`,
        principal: principal.role === 'operator' ? { kind: 'operator' } : { kind: 'workspace', workspaceId: principal.workspaceId },
      };
    }
    const { machine } = caller;
    return {
      subject: `machine:${machine.id}`,
      principal: {
        kind: 'machine',
        builder: this.builderPools.includes(machine.pool),
        placed: (repository) => this.containers.imageRepositoryPlacedOn(machine.id, `${this.host}/${repository}`),
      },
    };
  }
}

/** The password of Basic auth, or a bearer token: registry clients send the former. */
function secretOf(authorization: string | undefined): string {
  if (!authorization) throw new UnauthorizedException(`registry tokens need credentials: ${CREDENTIALS}`);
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (bearer) return bearer[1]!;
  const basic = /^Basic\s+(\S+)\s*$/i.exec(authorization);
  const decoded = basic ? Buffer.from(basic[1]!, 'base64').toString('utf8') : '';
  const colon = decoded.indexOf(':');
  if (colon < 0 || colon === decoded.length - 1) throw new UnauthorizedException(`malformed Authorization header: ${CREDENTIALS}`);
  return decoded.slice(colon + 1);
}

/** The signing key, checked at boot: distribution's ES256 wants a P-256 key. */
function loadSigningKey(file: string) {
  const key = createPrivateKey(readFileSync(file));
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
    throw new Error(`REGISTRY_TOKEN_KEY_FILE=${file}: expected an EC P-256 private key (openssl ecparam -name prime256v1 -genkey)`);
  return key;
}
