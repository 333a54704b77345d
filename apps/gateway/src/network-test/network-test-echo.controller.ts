import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { NETWORK_TEST_ECHO, NetworkEcho, type NetworkEchoReply } from '#tern/contracts';
import { OnRequest } from '#tern/messaging';
import { NetworkTestService } from './network-test.service.js';

/** The NATS leg of an agent's network test: one gateway replica answers each echo. */
@Controller()
export class NetworkTestEchoController {
  constructor(private readonly networkTest: NetworkTestService) {}

  @OnRequest(NETWORK_TEST_ECHO)
  echo(@Payload() request: NetworkEcho): NetworkEchoReply {
    return this.networkTest.echo(request);
  }
}
