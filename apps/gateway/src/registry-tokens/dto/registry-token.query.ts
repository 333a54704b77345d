import { IsOptional, IsString, MaxLength } from 'class-validator';

/**
 * The Docker token-auth request (`GET <realm>?service=…&scope=…`): `scope` repeats once per
 * repository; `account`, `client_id` and `offline_token` are what clients add and are ignored.
 */
export class RegistryTokenQuery {
  @IsString() @MaxLength(200) service!: string;
  @IsOptional() @IsString({ each: true }) @MaxLength(500, { each: true }) scope?: string | string[];
  @IsOptional() @IsString() @MaxLength(200) account?: string;
  @IsOptional() @IsString() @MaxLength(200) client_id?: string;
  @IsOptional() @IsString() offline_token?: string;
}
