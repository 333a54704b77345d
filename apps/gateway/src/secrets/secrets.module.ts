import { Module } from '@nestjs/common';
import { MachineRegistrationModule } from '../machine-registration/machine-registration.module.js';
import { AgentSecretsController } from './agent-secrets.controller.js';
import { SecretsController } from './secrets.controller.js';
import { SecretsService } from './secrets.service.js';

@Module({
  imports: [MachineRegistrationModule],
  controllers: [SecretsController, AgentSecretsController],
  providers: [SecretsService],
  exports: [SecretsService],
})
export class SecretsModule {}
