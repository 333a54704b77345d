import { SetMetadata } from '@nestjs/common';

export const IS_PUBLIC = 'ternPublicRoute';

/** A route anyone may call without a token: health probes, metrics, API docs. */
export const Public = () => SetMetadata(IS_PUBLIC, true);
