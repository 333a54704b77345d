import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import {
  AGENT_SANDBOX_CREATE,
  AGENT_SANDBOX_REMOVE,
  SandboxCreate,
  type SandboxCreateReply,
  SandboxRemove,
  type SandboxRemoveReply,
  AGENT_SANDBOX_SNAPSHOT,
  SandboxSnapshot,
  type SandboxSnapshotReply,
  SANDBOX_TUNNEL_OPEN,
  TunnelOpen,
  type TunnelOpenReply,
} from '#tern/contracts';
import { OnRequest } from '#tern/messaging';
import { SandboxesService } from './sandboxes.service.js';

/** Sandbox commands for this machine only: `<ns>.agent.<own machine id>.sandbox.{create,remove,snapshot,tunnel}.v1`. */
@Controller()
export class SandboxCommandsController {
  constructor(private readonly sandboxes: SandboxesService) {}

  @OnRequest(AGENT_SANDBOX_CREATE, { tokens: ['machineId'] })
  create(@Payload() cmd: SandboxCreate): Promise<SandboxCreateReply> {
    return this.sandboxes.create(cmd);
  }

  @OnRequest(AGENT_SANDBOX_REMOVE, { tokens: ['machineId'] })
  remove(@Payload() cmd: SandboxRemove): Promise<SandboxRemoveReply> {
    return this.sandboxes.remove(cmd);
  }

  @OnRequest(AGENT_SANDBOX_SNAPSHOT, { tokens: ['machineId'] })
  snapshot(@Payload() cmd: SandboxSnapshot): Promise<SandboxSnapshotReply> {
    return this.sandboxes.snapshot(cmd);
  }

  @OnRequest(SANDBOX_TUNNEL_OPEN, { tokens: ['machineId'] })
  openTunnel(@Payload() cmd: TunnelOpen): Promise<TunnelOpenReply> {
    return this.sandboxes.openTunnel(cmd);
  }
}
