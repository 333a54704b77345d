import { Module } from '@nestjs/common';
import { MachineRegistrationModule } from '../machine-registration/machine-registration.module.js';
import { RegistryTokensController } from './registry-tokens.controller.js';
import { RegistryTokens } from './registry-tokens.service.js';

@Module({
  imports: [MachineRegistrationModule],
  controllers: [RegistryTokensController],
  providers: [RegistryTokens],
  exports: [RegistryTokens],
})
export class RegistryTokensModule {}
