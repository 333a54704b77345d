import { Module } from '@nestjs/common';
import { NatsAccount } from './nats-account.js';
import { NatsUsersController } from './nats-users.controller.js';
import { NatsUsersService } from './nats-users.service.js';

@Module({ controllers: [NatsUsersController], providers: [NatsUsersService, NatsAccount], exports: [NatsUsersService] })
export class NatsUsersModule {}
