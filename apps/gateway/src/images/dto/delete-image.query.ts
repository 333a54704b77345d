import { ApiProperty } from '@nestjs/swagger';
import { IsString, Length } from 'class-validator';

/** `?ref=` of an image delete: a reference has slashes, so it is a query parameter rather than a path segment. */
export class DeleteImageQuery {
  @ApiProperty({
    example: 'registry.example.com/builds/3f0c…/app:1',
    description: "An image of Tern's registry by tag or digest (host/repository:tag or host/repository@sha256:…).",
  })
  @IsString()
  @Length(1, 1024)
  ref!: string;
}
