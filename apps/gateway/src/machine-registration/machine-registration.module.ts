import { Module } from '@nestjs/common';
import { MachinesModule } from '../machines/machines.module.js';
import { PoolsModule } from '../pools/pools.module.js';
import { MachineAuthService } from './machine-auth.service.js';
import { MachineCallerGuard } from './machine-caller.guard.js';
import { MachineKeepaliveService } from './machine-keepalive.service.js';
import { NatsAccount } from '../nats-users/nats-account.js';
import { MachineNatsUsers } from './machine-nats-users.js';
import { MachineRegistrationController } from './machine-registration.controller.js';
import { MachineRegistrationService } from './machine-registration.service.js';
import { TaskPermitsController } from './task-permits.controller.js';

/** Exports the guard and its service so other agent-facing routes can take the machine token too. */
@Module({
  imports: [PoolsModule, MachinesModule],
  controllers: [MachineRegistrationController, TaskPermitsController],
  providers: [MachineAuthService, MachineCallerGuard, MachineRegistrationService, MachineKeepaliveService, MachineNatsUsers, NatsAccount],
  exports: [MachineAuthService, MachineCallerGuard],
})
export class MachineRegistrationModule {}
