import { IsString, Matches, MaxLength } from 'class-validator';

/** `?path=` of the files API: absolute, or relative to the sandbox's workdir; never through `..`. */
export class SandboxPathQuery {
  @IsString({ message: 'path is required (?path=/workspace/file.txt)' })
  @MaxLength(4096)
  @Matches(/^(?!(.*\/)?\.\.(\/|$))/, { message: 'path must not contain ".." segments: name the file inside the sandbox directly' })
  path!: string;
}
