import { homedir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { execa } from 'execa';
import { buildBaseImage, type RegistryAccess } from '#tern/runtime';
import { TernClient } from '#tern/client';
import { resolveContext } from '../cli-config.js';
import { buildSpecImage } from './image-build.js';
import { registryGet } from '../registry-client.js';
import { table } from '../table.js';

/**
 * The registry from the context, as skopeo reaches it: with the builders' user, or under token
 * auth with this context's API token as the password (the gateway's token service decides what it may push).
 */
export function registryAccess(): RegistryAccess & { url: string } {
  const { registry, token } = resolveContext();
  if (!registry)
    throw new Error(
      'no image registry: run npm run up (it starts one) or set REGISTRY_URL with REGISTRY_PUSH_USERNAME / REGISTRY_PUSH_PASSWORD',
    );
  const url = new URL(registry.url);
  return {
    url: registry.url,
    host: url.host,
    insecure: registry.insecure ?? url.protocol === 'http:',
    ...(registry.tokenAuth && token ? { username: 'tern', password: token } : {}),
    ...(registry.username ? { username: registry.username, password: registry.password ?? '' } : {}),
  };
}

function buildCommand(): Command {
  return new Command('build')
    .description(
      "Build the spec's image: (apt, pip, npm, commands, env, workdir) on a builder machine and push it, without deploying; prints the reference",
    )
    .argument('<spec>', 'tern.yaml')
    .action(async (file: string) => {
      const ref = await buildSpecImage(new TernClient(resolveContext()), file, (l) => process.stderr.write(`${l}\n`));
      process.stdout.write(`${ref}\n`);
    });
}

function listCommand(): Command {
  return new Command('list')
    .description("The repositories and tags in the registry (Tern's base, builds/<name>, pushed images)")
    .action(async () => {
      const access = registryAccess();
      const get = <T>(path: string): Promise<T> => registryGet<T>(access, path);
      const { repositories = [] } = await get<{ repositories?: string[] }>('/v2/_catalog?n=1000');
      const rows: string[][] = [];
      for (const repo of repositories) {
        const { tags } = await get<{ tags?: string[] | null }>(`/v2/${repo}/tags/list`);
        for (const tag of tags ?? []) rows.push([`${access.host}/${repo}`, tag]);
      }
      process.stdout.write(
        rows.length ? `${table(['REPOSITORY', 'TAG'], rows)}\n` : `no images in ${access.url} yet (tern image base pushes Tern's base)\n`,
      );
    });
}

function human(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB'];
  let v = bytes;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function baseCommand(): Command {
  return new Command('base')
    .description(
      "Build Tern's Debian base image with debootstrap from Debian's archive and push it to the registry (needs root; the root filesystem is cached, so a second run only pushes)",
    )
    .option('--suite <suite>', 'Debian suite', 'bookworm')
    .option('--mirror <url>', 'Debian archive', 'http://deb.debian.org/debian')
    .option('--include <packages>', 'packages added to minbase, comma-separated', 'python3,ca-certificates')
    .option('--tag <repo:tag>', 'where in the registry', 'tern/base:bookworm')
    .option(
      '--cache <dir>',
      'where the debootstrapped root filesystem (and its packed layer) is kept',
      join(homedir(), '.cache', 'tern', 'base-image'),
    )
    .action(async (o: { suite: string; mirror: string; include: string; tag: string; cache: string }) => {
      if (process.getuid?.() !== 0) throw new Error('tern image base runs debootstrap, which needs root: run it with sudo');
      const access = registryAccess();
      const target = `${access.host}/${o.tag}`;
      const t0 = Date.now();
      const digest = await buildBaseImage(target, [access], {
        suite: o.suite,
        mirror: o.mirror,
        include: o.include.split(',').filter(Boolean),
        cacheDir: o.cache,
        onProgress: (line) => process.stderr.write(`  ${line}\n`),
      });
      process.stdout.write(`${target}@${digest}\n`);
      process.stderr.write(`pushed in ${((Date.now() - t0) / 1000).toFixed(1)}s; use it as  image: ${target}\n`);
    });
}

function showCommand(): Command {
  return new Command('show')
    .description('An image in the registry: digest, layers and sizes, config (REF: <repo>:<tag>, <repo>@sha256:…, or a full reference)')
    .argument('<ref>')
    .option('--json', 'print the manifest and config as JSON')
    .action(async (ref: string, o: { json?: boolean }) => {
      const access = registryAccess();
      const full =
        ref.startsWith(`${access.host}/`) || ref.split('/')[0]!.includes('.') || ref.split('/')[0]!.includes(':')
          ? ref
          : `${access.host}/${ref}`;
      const mine = full.startsWith(`${access.host}/`);
      const auth = mine && access.username ? ['--creds', `${access.username}:${access.password ?? ''}`] : ['--no-creds'];
      const tls = `--tls-verify=${mine && access.insecure ? 'false' : 'true'}`;
      const run = async (extra: string[]) => {
        const r = await execa('skopeo', ['inspect', tls, ...auth, ...extra, `docker://${full}`], { reject: false });
        if (r.exitCode !== 0) throw new Error(`${full}: ${(r.stderr || r.stdout).trim().split('\n').pop()}`);
        return JSON.parse(r.stdout) as Record<string, unknown>;
      };
      const [inspect, manifest, config] = [await run([]), await run(['--raw']), await run(['--config'])];
      if (o.json) return void process.stdout.write(`${JSON.stringify({ inspect, manifest, config }, null, 2)}\n`);
      const layers = ((manifest.layers as { digest: string; size: number }[] | undefined) ?? []).map((l) => ({
        Digest: l.digest,
        Size: l.size,
      }));
      const history = ((config.history as { created_by?: string; empty_layer?: boolean }[] | undefined) ?? []).filter(
        (h) => !h.empty_layer,
      );
      const cfg = (config.config ?? {}) as { Env?: string[]; Cmd?: string[]; WorkingDir?: string };
      // host/repo, without the tag or digest the user typed.
      const named = full.split('@')[0]!;
      const repository = named.lastIndexOf(':') > named.lastIndexOf('/') ? named.slice(0, named.lastIndexOf(':')) : named;
      process.stdout.write(
        [
          `${repository}@${String(inspect.Digest)}`,
          `created ${String(inspect.Created ?? '-')}  ${String(inspect.Os)}/${String(inspect.Architecture)}  ${human(layers.reduce((n, l) => n + l.Size, 0))} in ${layers.length} layer${layers.length === 1 ? '' : 's'}`,
          '',
          table(
            ['LAYER', 'SIZE', 'STEP'],
            layers.map((l, i) => [l.Digest.slice(0, 19), human(l.Size), history[i]?.created_by ?? '-']),
          ),
          '',
          `env:     ${(cfg.Env ?? []).join(' ') || '-'}`,
          `cmd:     ${(cfg.Cmd ?? []).join(' ') || '-'}`,
          `workdir: ${cfg.WorkingDir || '/'}`,
          '',
        ].join('\n'),
      );
    });
}

function rmCommand(): Command {
  return new Command('rm')
    .description(
      "Delete an image from Tern's registry, with every tag of its manifest (workspace admin: your own builds; operator: any); refused while a deployment or a live sandbox runs it",
    )
    .argument('<ref>', 'host/repository:tag or host/repository@sha256:…')
    .action(async (ref: string) => {
      const deleted = await new TernClient(resolveContext()).deleteImage(ref);
      process.stdout.write(`Deleted ${deleted.image} (${deleted.digest}) and every tag naming it.\n`);
    });
}

export function imageCommand(): Command {
  return new Command('image')
    .description("Images in the registry: build the Debian base, build a spec's image, show one, delete one")
    .addCommand(baseCommand())
    .addCommand(buildCommand())
    .addCommand(listCommand())
    .addCommand(showCommand())
    .addCommand(rmCommand());
}
