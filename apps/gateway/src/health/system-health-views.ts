import type { Conforms, ControlPlaneRole, SameType, SystemHealth as SystemHealthContract } from '#tern/contracts';
import type { CONTROL_PLANE_ROLES, SystemHealth } from './system-health.service.js';

/** `GET /health/ready`'s answer, held to its contract (shared with the CLI): fails type-checking when they part. */
export type SystemHealthConforms = [
  Conforms<SameType<SystemHealth, SystemHealthContract>>,
  Conforms<SameType<(typeof CONTROL_PLANE_ROLES)[number], ControlPlaneRole>>,
];
