import { plainToInstance } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  ValidateBy,
  type ValidationError,
  validateSync,
} from 'class-validator';
import { IsRecordOf } from '../validation.js';

// The grammar of github.com/distribution/reference, without the implicit docker.io: Tern has no
// default registry, so the first component must name one (a dot, a port or `localhost`).
const DOMAIN = /^(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9a-fA-F:]+\])(?::\d{1,5})?$/;
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^\w[\w.-]{0,127}$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** Why a string is not an image in a registry (`host[:port]/repo[:tag][@sha256:…]`), or undefined when it is one. */
export function registryRefProblem(ref: string): string | undefined {
  if (ref.length > 512) return 'is longer than 512 characters';
  const at = ref.indexOf('@');
  const named = at >= 0 ? ref.slice(0, at) : ref;
  const digest = at >= 0 ? ref.slice(at + 1) : undefined;
  if (digest !== undefined && !DIGEST.test(digest)) return `digest "${digest}" is not sha256:<64 lower-case hex digits>`;
  const slash = named.indexOf('/');
  if (slash < 0) return 'names no registry: write <registry host>[:port]/<repository>[:tag][@sha256:<digest>]';
  const domain = named.slice(0, slash);
  if (!DOMAIN.test(domain) || !(domain.includes('.') || domain.includes(':') || domain === 'localhost'))
    return `"${domain}" is not a registry host: it needs a dot or a port (registry.example.com, 127.0.0.1:5000, localhost:5000)`;
  const rest = named.slice(slash + 1);
  const colon = rest.lastIndexOf(':');
  const path = colon >= 0 ? rest.slice(0, colon) : rest;
  const tag = colon >= 0 ? rest.slice(colon + 1) : undefined;
  if (tag !== undefined && !TAG.test(tag)) return `tag "${tag}" must be 1-128 letters, digits, _ . or -, not starting with . or -`;
  const bad = path.split('/').find((c) => !PATH_COMPONENT.test(c));
  if (bad !== undefined) return `repository part "${bad}" must be lower-case letters and digits, separated by . _ __ or -`;
  if (tag === undefined && digest === undefined) return 'names no tag and no digest: add :<tag> or @sha256:<digest>';
  return undefined;
}

/** `debian:bookworm`-style names Docker Hub would resolve: refused with a pointer to what works everywhere. */
function baseProblem(base: string): string | undefined {
  if (base === 'tern') return undefined;
  const problem = registryRefProblem(base);
  if (!problem) return undefined;
  if (!base.includes('/') || !registryRefProblem(`docker.io/${base}`))
    return `"${base}" names no registry (no public registry is reachable from every site): use "tern" (Tern's Debian base, \`tern image base\`) or <registry host>/<repository>:<tag>, e.g. docker.io/library/${base}`;
  return problem;
}

/** Debian package names (policy 5.6.1), optionally `=version`. */
const APT_PACKAGE = /^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$/;
/** A PEP 508 requirement without markers or URLs: name, extras, version specifiers. */
const PIP_REQUIREMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*((===|==|~=|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*$/;
/** `name`, `@scope/name`, with an optional `@version-or-range`. */
const NPM_PACKAGE = /^(@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*(@[\w.^~<>=*| -]+)?$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * An image built from the spec: each list item one step and one layer, in the order base, apt,
 * pip, npm, commands (env and workdir go to the image config). A layer's cache key is
 * hash(parent layer digest, step), so a changed step rebuilds from there on.
 */
export class ImageBuild {
  /** `tern` (Tern's Debian base, the default) or any registry reference. */
  @IsOptional() @IsString() @MaxLength(512) base?: string;
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(500)
  @Matches(APT_PACKAGE, {
    each: true,
    message: 'apt must list Debian package names (lower-case letters, digits, + - .), optionally =version',
  })
  apt?: string[];
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(500)
  @Matches(PIP_REQUIREMENT, {
    each: true,
    message: 'pip must list requirements such as requests==2.32.3 or numpy>=1.26 (no URLs, no options)',
  })
  pip?: string[];
  /** Index for `pip:` (PIP_INDEX_URL); absent: the builder's default. */
  @IsOptional() @Matches(/^https?:\/\/\S+$/, { message: 'pip_index_url must be an http(s) URL' }) pip_index_url?: string;
  /** A directory of wheels inside the build context (`pip install --no-index --find-links`). */
  @IsOptional()
  @Matches(/^[\w.-][\w./-]*$/, { message: 'pip_wheels must be a relative path inside the spec directory' })
  pip_wheels?: string;
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(500)
  @Matches(NPM_PACKAGE, { each: true, message: 'npm must list packages such as lodash@4 or @scope/name@^1.2' })
  npm?: string[];
  @IsOptional() @IsArray() @ArrayMaxSize(100) @IsString({ each: true }) @MaxLength(8192, { each: true }) commands?: string[];
  @IsOptional() @IsRecordOf('string') env?: Record<string, string>;
  @IsOptional() @Matches(/^\/[^\0]*$/, { message: 'workdir must be an absolute path' }) workdir?: string;
}

/** `image.apt.1: …` for each problem of a build, deepest first. */
function buildProblems(errors: ValidationError[], prefix: string): string[] {
  return errors.flatMap((e) => {
    const path = `${prefix}.${e.property}`;
    const own = Object.values(e.constraints ?? {}).map((m) =>
      m.includes('should not exist') ? `${path} is not a build field` : `${path}: ${m}`,
    );
    return [...own, ...buildProblems(e.children ?? [], path)];
  });
}

/** Why `value` is not an image a deployment may name, or undefined when it is. */
export function deploymentImageProblem(value: unknown): string | undefined {
  if (typeof value === 'string') {
    if (value === 'host') return undefined;
    if (value.startsWith('oci:')) return 'image cannot name a path on the worker (oci:<path>): use "host", a registry reference or a build';
    const problem = registryRefProblem(value);
    if (!problem) return undefined;
    return `image "${value}" ${problem.startsWith('names') ? problem : `is not a registry reference: ${problem}`}`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return 'image must be "host", a registry reference (registry.example.com/team/model:1.2) or a build ({ base, apt, pip, npm, commands, env, workdir })';
  const build = plainToInstance(ImageBuild, value);
  const problems = buildProblems(validateSync(build, { whitelist: true, forbidNonWhitelisted: true }), 'image');
  if (build.base !== undefined && typeof build.base === 'string') {
    const p = baseProblem(build.base);
    if (p) problems.push(`image.base: ${p}`);
  }
  if (typeof build.env === 'object' && build.env !== null)
    for (const name of Object.keys(build.env))
      if (!ENV_NAME.test(name))
        problems.push(`image.env: "${name}" is not a variable name (letters, digits and _, not starting with a digit)`);
  return problems.length ? problems.join('; ') : undefined;
}

export const IS_DEPLOYMENT_IMAGE = 'isDeploymentImage';

/** `host`, a registry reference or an ImageBuild; the message names the field and the rule broken. */
export function IsDeploymentImage(): PropertyDecorator {
  return ValidateBy({
    name: IS_DEPLOYMENT_IMAGE,
    validator: {
      validate: (value: unknown) => deploymentImageProblem(value) === undefined,
      defaultMessage: (args) => deploymentImageProblem(args?.value) ?? 'image is invalid',
    },
  });
}

/** Whether a spec's image must be built before it can run. */
export function isImageBuild(image: unknown): image is ImageBuild {
  return typeof image === 'object' && image !== null && !Array.isArray(image);
}

/**
 * Why `value` is not an image a sandbox may name, or undefined when it is: a deployment's string
 * forms (`host` or a registry reference). A build is made first (tern image build) and named by
 * the reference it answers, as `tern deploy` does for a deployment.
 */
export function sandboxImageProblem(value: unknown): string | undefined {
  if (typeof value === 'string') return deploymentImageProblem(value);
  if (isImageBuild(value))
    return 'a sandbox runs a built image, not a build: build it first (tern image build) and name the reference it answers';
  return 'image must be "host" or a registry reference (registry.example.com/team/model:1.2)';
}

/** `host` or a registry reference; the message names the rule broken. */
export function IsSandboxImage(): PropertyDecorator {
  return ValidateBy({
    name: 'isSandboxImage',
    validator: {
      validate: (value: unknown) => sandboxImageProblem(value) === undefined,
      defaultMessage: (args) => sandboxImageProblem(args?.value) ?? 'image is invalid',
    },
  });
}
