import { ApiProperty } from '@nestjs/swagger';
import { ArrayMinSize, ArrayUnique, IsArray, IsIn, IsOptional, IsString, IsUUID, Matches } from 'class-validator';
import { type CreateNatsUserRequest, INTEGRATOR_SCOPES, type IntegratorScope, IsUserPublicKey } from '#tern/contracts';

export class CreateNatsUserDto implements CreateNatsUserRequest {
  @ApiProperty({ example: 'ci-bridge', description: 'A label: 1-64 letters, digits, - or _.' })
  @IsString()
  @Matches(/^[A-Za-z0-9_-]{1,64}$/, { message: 'name must be 1-64 letters, digits, - or _' })
  name!: string;

  @ApiProperty({
    required: false,
    description: "The workspace id it acts for; default: the caller's. Only an operator token names another.",
  })
  @IsOptional()
  @IsUUID('all', { message: 'workspace must be a workspace id (a UUID)' })
  workspace?: string;

  @ApiProperty({ enum: INTEGRATOR_SCOPES, isArray: true, example: ['events', 'submit'] })
  @IsArray()
  @ArrayMinSize(1, { message: 'allow must name at least one of: events, submit' })
  @ArrayUnique()
  @IsIn(INTEGRATOR_SCOPES, { each: true, message: 'allow takes events and/or submit' })
  allow!: IntegratorScope[];

  @ApiProperty({
    example: 'UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4',
    description: 'The user public key (U…) of a key pair you made; its seed stays with you.',
  })
  @IsUserPublicKey()
  publicKey!: string;
}
