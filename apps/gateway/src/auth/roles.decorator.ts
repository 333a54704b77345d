import { SetMetadata } from '@nestjs/common';
import { type ApiTokenRole } from '#tern/persistence';
import { REQUIRED_ROLES } from './api-token.guard.js';

/** A platform action (pools, machines, workspaces, every workspace's usage): operator tokens only. */
export const OperatorOnly = () => SetMetadata(REQUIRED_ROLES, ['operator'] satisfies ApiTokenRole[]);

/** Managing the calling workspace (its tokens): its admin tokens, or the operator's in its own workspace. */
export const WorkspaceAdminOnly = () => SetMetadata(REQUIRED_ROLES, ['admin', 'operator'] satisfies ApiTokenRole[]);
