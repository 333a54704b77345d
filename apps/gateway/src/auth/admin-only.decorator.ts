import { SetMetadata } from '@nestjs/common';
import { ADMIN_ONLY } from './api-token.guard.js';

/** A route only admin tokens may call. */
export const AdminOnly = () => SetMetadata(ADMIN_ONLY, true);
