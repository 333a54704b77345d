import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { acceptBinaryBodies } from '../binary-bodies.js';
import { MachineRegistrationModule } from '../machine-registration/machine-registration.module.js';
import { AgentCodeController } from './agent-code.controller.js';
import { CodeController } from './code.controller.js';
import { CodeStore } from './code-store.js';
import { CodeService } from './code.service.js';

@Module({
  imports: [MachineRegistrationModule],
  controllers: [CodeController, AgentCodeController],
  providers: [CodeStore, CodeService],
  exports: [CodeStore, CodeService],
})
export class CodeModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit() {
    acceptBinaryBodies(this.adapterHost);
  }
}
