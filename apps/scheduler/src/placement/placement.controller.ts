import { Controller, Logger } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { MACHINE_STATE_CHANGED, MachineStateChanged, SCALE_COMMAND, ScaleCommand } from '#tern/contracts';
import { JetStreamContext, OnMessage } from '#tern/messaging';
import { DesiredState } from './desired-state.js';
import { Reconciler } from './reconciler.js';

/** Scale commands set the desired counts; machine changes wake the reconcile loop early. */
@Controller()
export class PlacementController {
  private readonly logger = new Logger('placement');

  constructor(
    private readonly desired: DesiredState,
    private readonly reconciler: Reconciler,
  ) {}

  @OnMessage(SCALE_COMMAND)
  async scale(@Payload() cmd: ScaleCommand, @Ctx() ctx: JetStreamContext) {
    const outcome = await this.desired.apply(cmd);
    if (outcome === 'unknown-deployment-version') {
      ctx.delivery?.reject(`scale command for unknown deployment ${cmd.deploymentId} version ${cmd.deploymentVersion}`);
      return;
    }
    this.logger.debug({ ...cmd, outcome }, `scale ${cmd.deploymentId} v${cmd.deploymentVersion} to ${cmd.desired}: ${outcome}`);
    if (outcome === 'applied') this.reconciler.wake();
  }

  // Only changes from now on matter: the loop reads machine states from Postgres anyway.
  @OnMessage(MACHINE_STATE_CHANGED, { deliver: 'new' })
  machineChanged(@Payload() event: MachineStateChanged) {
    // New room: versions waiting for it should not sit out their back-off.
    if (event.to === 'ready') this.reconciler.resetBackoff();
    if (event.to === 'ready' || event.to === 'offline' || event.from === 'ready') this.reconciler.wake();
  }
}
