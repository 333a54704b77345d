import { Logger, type Provider } from '@nestjs/common';
import { lookup } from 'node:dns/promises';
import { EventEmitter } from 'node:events';
import { chmod, stat } from 'node:fs/promises';
import { isIPv4 } from 'node:net';
import { dirname, join } from 'node:path';
import type { ContainerIsolation } from '#tern/contracts';
import {
  BridgeNetwork,
  type BridgeNetworkOptions,
  type ContainerRuntime,
  detectRuntime,
  ImageStore,
  parseUpstream,
  RuncRuntime,
  type RuntimeLogger,
} from '#tern/runtime';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { registryCredentials } from './registry-credentials.js';
import { SiteCacheFront } from './site-cache-front.js';

export const CONTAINER_RUNTIME = Symbol('CONTAINER_RUNTIME');

/**
 * The runtime and how it isolates containers, or why there is none (the agent still joins; it
 * refuses container starts with that reason).
 */
export type RuntimeHandle =
  | { runtime: ContainerRuntime; isolation: ContainerIsolation; pulls: ImagePulls; problem?: undefined }
  | { runtime?: undefined; isolation?: undefined; pulls?: undefined; problem: string };

/** Pull progress of registry images, by reference: the containers waiting on a pull show it in their logs. */
export class ImagePulls extends EventEmitter<{ progress: [ref: string, line: string] }> {}

/**
 * Container root is host uid/gid USER_NAMESPACE_HOST_ID + 0 …: a range no account on the host
 * uses (regular accounts and the usual /etc/subuid ranges sit far below it).
 */
export const USER_NAMESPACE = { hostId: 1_000_000_000, size: 65_536 } as const;

/**
 * A container's root under a user namespace is an unprivileged host user, which must still walk
 * to the image store and the code bundles under the state directory: when every parent lets it
 * (otherwise the runtime logs why it runs without user namespaces), the directory gets o+x
 * (search, not read: nothing in it can be listed, and config.yaml stays 0600).
 */
async function letMappedRootIn(dir: string, logger: Logger): Promise<void> {
  for (let parent = dirname(dir); parent !== dirname(parent); parent = dirname(parent))
    if (((await stat(parent)).mode & 0o001) === 0) return;
  const mode = (await stat(dir)).mode & 0o777;
  if (mode & 0o001) return;
  await chmod(dir, mode | 0o001);
  logger.log(
    `state directory ${dir} is now searchable by other users (mode ${(mode | 0o001).toString(8)}) so that containers in user namespaces reach their images and code`,
  );
}

/**
 * The control plane's addresses, which no container reaches (on top of the ranges none ever
 * does): the gateway's and the NATS servers' hosts, as IPv4 /32s.
 */
async function controlPlaneAddresses(ctx: AgentContext): Promise<string[]> {
  const hosts = [ctx.settings.gatewayUrl, ...ctx.registration.nats.servers].map((u) => {
    try {
      return new URL(/^[a-z]+:\/\//i.test(u) ? u : `nats://${u}`).hostname;
    } catch {
      return '';
    }
  });
  const out = new Set<string>();
  for (const host of hosts.filter(Boolean)) {
    if (isIPv4(host)) out.add(`${host}/32`);
    else for (const a of await lookup(host, { all: true, family: 4 }).catch(() => [])) out.add(`${a.address}/32`);
  }
  return [...out];
}

/** A Nest logger in the runtime's shape (`context` names it in the logs). */
export function runtimeLogger(context = 'runtime'): RuntimeLogger {
  const logger = new Logger(context);
  return {
    debug: (obj, msg) => logger.debug(obj, msg ?? ''),
    info: (obj, msg) => logger.log(obj, msg ?? ''),
    warn: (obj, msg) => logger.warn(obj, msg ?? ''),
    error: (obj, msg) => logger.error(obj, msg ?? ''),
  };
}

/**
 * Containers, images and volumes live under the agent's state directory: `runtime/` (runc's
 * root and bundles), `images/`, `volumes/<workspace>/<volume>`.
 */
export const containerRuntimeProvider: Provider = {
  provide: CONTAINER_RUNTIME,
  inject: [AGENT_CONTEXT],
  useFactory: async (ctx: AgentContext): Promise<RuntimeHandle> => {
    const dir = ctx.settings.stateDir;
    const logger = new Logger('containers');
    try {
      const network =
        ctx.settings.network === 'private'
          ? new BridgeNetwork({
              stateDir: join(dir, 'network'),
              ...(ctx.settings.networkSubnet ? { subnet: ctx.settings.networkSubnet } : {}),
              ...(ctx.settings.bridge ? { bridge: ctx.settings.bridge } : {}),
              ...containerDns(ctx.settings.dns),
              blocked: await controlPlaneAddresses(ctx),
              logger: runtimeLogger(),
            })
          : undefined;
      if (ctx.settings.userNamespaces === 'auto') await letMappedRootIn(dir, logger);
      const siteCache = new SiteCacheFront(ctx.settings.siteCache, (message) => logger.warn(message));
      // The image store asks the runtime which images its containers use (never evicted).
      const runtimeRef: { current?: ContainerRuntime } = {};
      const pulls = new ImagePulls();
      const runtime = await detectRuntime({
        prefer: ctx.settings.runtime,
        stateDir: join(dir, 'runtime'),
        images: new ImageStore({
          root: join(dir, 'images'),
          registries: () => siteCache.through(registryCredentials(ctx)),
          onPullProgress: (ref, line) => {
            logger.log(`image ${ref}: ${line}`);
            pulls.emit('progress', ref, line);
          },
          maxBytes: ctx.settings.imageCacheBytes,
          inUse: async () => ((await runtimeRef.current?.list()) ?? []).map((c) => c.image.digest),
          onEvict: (digest) => logger.log(`image ${digest} evicted from the cache (over ${ctx.settings.imageCacheBytes} bytes)`),
        }),
        volumeRoot: join(dir, 'volumes'),
        logger: runtimeLogger(),
        ...(network ? { network } : {}),
        ...(ctx.settings.userNamespaces === 'auto' ? { userNamespace: USER_NAMESPACE } : {}),
      });
      runtimeRef.current = runtime;
      // nerdctl brings its own networking: the bridge is runc's.
      const isolation: ContainerIsolation = {
        runtime: runtime.kind,
        network: runtime instanceof RuncRuntime && network ? 'private' : 'host',
        userNamespaces: runtime instanceof RuncRuntime && !!(await runtime.userNamespace()),
      };
      logger.log(
        `container runtime: ${runtime.kind} (state in ${join(dir, 'runtime')}), network ${isolation.network}, user namespaces ${isolation.userNamespaces ? 'on' : 'off'}`,
      );
      if (isolation.network === 'host')
        logger.warn('containers share the host network namespace (network: host): they can reach everything the host can');
      return { runtime, isolation, pulls };
    } catch (e) {
      const problem = (e as Error).message;
      new Logger('containers').warn(`no container runtime (${problem}); container starts will be refused`);
      return { problem };
    }
  },
};

/** The bridge's DNS option for the agent's `dns` setting (checked when the settings were read). */
function containerDns(setting: string): Pick<BridgeNetworkOptions, 'dns'> {
  if (setting === 'host') return {};
  if (setting === 'off') return { dns: false };
  return { dns: setting.split(',').map((r) => parseUpstream(r.trim())!) };
}
