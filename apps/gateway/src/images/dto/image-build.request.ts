import { IsOptional, Matches, ValidateBy } from 'class-validator';
import { deploymentImageProblem, type ImageBuild, isImageBuild } from '#tern/contracts';

/** Why `value` is not a build the gateway can send to a builder, or undefined when it is. */
function buildProblem(value: unknown): string | undefined {
  if (!isImageBuild(value)) return 'image must be a build ({ base, apt, pip, npm, commands, env, workdir }); a reference needs no build';
  return deploymentImageProblem(value);
}

/** `POST /api/v1/images/builds`: the `image:` build of a spec, its name, and its folder when the build reads from it. */
export class ImageBuildRequest {
  /** The image goes to `builds/<workspace id>/<name>` in the registry (default: `image`). */
  @IsOptional()
  @Matches(/^[a-z0-9][a-z0-9-]{0,62}$/, {
    message: 'name must be 1-63 lower-case letters, digits or - (the image goes to builds/<workspace id>/<name>)',
  })
  name?: string;

  @ValidateBy({
    name: 'isImageBuild',
    validator: {
      validate: (value: unknown) => buildProblem(value) === undefined,
      defaultMessage: (args) => buildProblem(args?.value) ?? 'image is invalid',
    },
  })
  image!: ImageBuild;

  /** The spec's folder, uploaded first (PUT /api/v1/code/<digest>): needed by `pip_wheels`, bound at /tern/context. */
  @IsOptional() @Matches(/^sha256:[0-9a-f]{64}$/, { message: 'code must be a sha256:<64 hex> digest of an uploaded folder' }) code?: string;
}
