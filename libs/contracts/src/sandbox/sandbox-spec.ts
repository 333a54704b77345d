// class-transformer's @Type reads design:type metadata: the Reflect polyfill must load first.
import 'reflect-metadata';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { IsCpuCores, IsGpuCount, IsPoolName, NetworkPolicy, SpecPlacement, SpecVolume } from '../deployment/deployment-spec.js';
import { IsSandboxImage } from '../deployment/image-spec.js';
import { IsRecordOf } from '../validation.js';

/** The writable directory of every sandbox, and its processes' default working directory. */
export const SANDBOX_WORKDIR = '/workspace';
/** Lifetime when the create names none (Modal's and beta9's default). */
export const SANDBOX_DEFAULT_TIMEOUT_SECONDS = 300;
/** The most one file of the files API may hold. */
export const SANDBOX_FILE_MAX_BYTES = 64 * 2 ** 20;

/** `POST /api/v1/sandboxes`. */
export class SandboxSpec {
  /**
   * `host` (the default: the machine's /usr, for development) or a registry reference as a
   * deployment's image takes one (a build of the workspace, `<registry>/builds/<ws>/<name>:<tag>`,
   * a snapshot, any image the registry holds); pinned to its digest at create.
   */
  @IsOptional() @IsSandboxImage() image?: string;
  /** Cores, e.g. 0.5 or 2; default 1. */
  @IsOptional() @IsCpuCores() cpu?: number;
  /** "512Mi", "2Gi", or a number of MiB; default 512Mi. */
  @IsOptional() memory?: string | number;
  /** A GPU type ("A100") or "any". */
  @IsOptional() @IsString() gpu?: string;
  @IsOptional() @IsGpuCount() gpu_count?: number;
  @IsOptional() @IsRecordOf('string') env?: Record<string, string>;
  /** Absolute; default /workspace (the sandbox's writable directory). */
  @IsOptional() @Matches(/^\/[^\0]*$/, { message: 'workdir must be an absolute path' }) @MaxLength(1024) workdir?: string;
  /** Seconds it may live at most; default 300. */
  @IsOptional() @IsInt() @Min(1) @Max(86_400) timeout?: number;
  /** Seconds without an API call (or keepalive) after which it ends; default none. */
  @IsOptional() @IsInt() @Min(1) @Max(86_400) idle_timeout?: number;
  /** `{ block: true }` or `{ allow: [CIDR, …] }`; default: the public internet. */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => NetworkPolicy) network?: NetworkPolicy;
  @IsOptional() @IsPoolName() pool?: string;
  /**
   * The workspace's volumes, `[{name, path, read_only}]`, mounted as a deployment's are: a
   * read-write one is the sandbox's own copy, committed back when the sandbox ends.
   */
  @IsOptional()
  @IsArray({ message: 'volumes must be a list of {name, path, read_only}' })
  @ArrayMaxSize(16)
  @ValidateNested({ each: true })
  @Type(() => SpecVolume)
  volumes?: SpecVolume[];
  /** The trust tier, as a deployment's: volumes or a private image ask for verified machines unless `verified: false`. */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => SpecPlacement) placement?: SpecPlacement;
}

export const EXEC_LANGUAGES = ['python', 'node', 'bash'] as const;
export type ExecLanguage = (typeof EXEC_LANGUAGES)[number];

/** `POST /api/v1/sandboxes/<id>/exec`: a command, or code in a language. */
export class ExecRequest {
  @IsOptional()
  @IsArray({ message: 'cmd must be a list of strings, e.g. ["python3", "-c", "print(1)"]' })
  @ArrayMinSize(1, { message: 'cmd must name a program' })
  @ArrayMaxSize(4096)
  @IsString({ each: true, message: 'cmd must be a list of strings, e.g. ["python3", "-c", "print(1)"]' })
  cmd?: string[];
  @IsOptional() @IsString() @MaxLength(1_000_000) code?: string;
  @IsOptional() @IsIn(EXEC_LANGUAGES, { message: `language must be one of ${EXEC_LANGUAGES.join(', ')}` }) language?: ExecLanguage;
  @IsOptional() @Matches(/^\/[^\0]*$/, { message: 'cwd must be an absolute path' }) @MaxLength(1024) cwd?: string;
  @IsOptional() @IsRecordOf('string') env?: Record<string, string>;
  /** Written to the process's stdin, which is then closed unless keep_stdin_open is true. */
  @IsOptional() @IsString() @MaxLength(1_000_000) stdin?: string;
  @IsOptional() @IsBoolean() keep_stdin_open?: boolean;
  /** Seconds before the process is killed; default: the sandbox's remaining lifetime. */
  @IsOptional() @IsInt() @Min(1) @Max(86_400) timeout?: number;
}

/** The program an exec runs: its cmd, or its code in the language's interpreter; a reason when neither or both. */
export function execArgs(req: ExecRequest): { ok: true; args: string[] } | { ok: false; reason: string } {
  if (req.cmd && req.code !== undefined) return { ok: false, reason: 'give cmd or code, not both' };
  if (req.cmd) return { ok: true, args: req.cmd };
  if (req.code === undefined) return { ok: false, reason: 'cmd (a list of strings) or code (with language) is required' };
  const language = req.language ?? 'python';
  const interpreter: Record<ExecLanguage, string[]> = { python: ['python3', '-c'], node: ['node', '-e'], bash: ['bash', '-c'] };
  return { ok: true, args: [...interpreter[language], req.code] };
}

/** `POST /api/v1/sandboxes/<id>/processes/<pid>/stdin`. */
export class StdinRequest {
  @IsString() @MaxLength(1_000_000) data!: string;
  /** Close stdin after writing. */
  @IsOptional() @IsBoolean() close?: boolean;
}

/** `POST /api/v1/sandboxes/<id>/ports`: expose a port the sandbox listens on. */
export class ExposePortRequest {
  @IsInt({ message: 'port must be a whole number' }) @Min(1) @Max(65535) port!: number;
  /** true: also reachable without a token, at an unguessable `/sandbox-public/<token>/` URL. */
  @IsOptional() @IsBoolean({ message: 'public must be true or false' }) public?: boolean;
}
