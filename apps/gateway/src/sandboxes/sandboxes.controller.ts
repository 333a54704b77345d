import { Body, Controller, Delete, Get, HttpCode, HttpException, Param, Post, Query, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ExposePortRequest, SandboxSpec, SnapshotRequest } from '#tern/contracts';
import { publicGatewayUrl } from '../machines/public-url.js';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { CreateSandboxQuery, ListSandboxesQuery } from './dto/sandbox-queries.js';
import { SandboxSnapshots } from './sandbox-snapshots.service.js';
import { CREATE_WAIT_SECONDS, SandboxesService } from './sandboxes.service.js';

@ApiTags('sandboxes')
@ApiBearerAuth()
@Controller('api/v1/sandboxes')
export class SandboxesController {
  constructor(
    private readonly sandboxes: SandboxesService,
    private readonly snapshots: SandboxSnapshots,
  ) {}

  @Post()
  @ApiOperation({
    summary: 'Create a sandbox',
    description:
      'Places a container on a machine of the pool and answers 201 once it runs: `{id, state, machine, …}`; or 202 with `state: placing` (and `Location`) when it does not run within `?wait=` s (default 60, 0 answers at once): GET follows it to running, or to failed with the reason. Its processes start in `workdir` (default /workspace, its writable directory). It ends after `timeout` s (default 300), after `idle_timeout` s without a call, on DELETE, or is reported lost with its machine. 503 when no machine can take it now.',
  })
  async create(
    @CurrentPrincipal() p: Principal,
    @Body() spec: SandboxSpec,
    @Query() q: CreateSandboxQuery,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const view = await this.sandboxes.create(p, spec, (q.wait ?? CREATE_WAIT_SECONDS) * 1000);
    if (view.state === 'placing') void reply.code(202).header('location', `/api/v1/sandboxes/${view.id}`);
    return view;
  }

  @Get()
  @ApiOperation({ summary: "The workspace's sandboxes, newest first: running ones, or all of the last 100 with live=false" })
  list(@CurrentPrincipal() p: Principal, @Query() q: ListSandboxesQuery) {
    return this.sandboxes.list(p, q.live ?? true);
  }

  @Get(':id')
  @ApiOperation({ summary: 'One sandbox: state (placing, running, terminated, failed, lost), machine, limits, timestamps' })
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.sandboxes.get(p, id);
  }

  @Delete(':id')
  @ApiOperation({ summary: 'Terminate the sandbox: its processes are killed, its container and files removed' })
  terminate(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.sandboxes.terminate(p, id);
  }

  @Post(':id/ports')
  @ApiOperation({
    summary: 'Expose a port the sandbox listens on',
    description:
      'Answers `{port, url, public}`: requests to `<gateway>/sandbox/<id>/<port>/…` with the workspace token (HTTP and WebSocket) reach that port inside the sandbox, carried over NATS to its agent (the machine needs no inbound port). With `public: true` the url is `<gateway>/sandbox-public/<token>/…`, reached with no token: the unguessable URL is the credential, until the sandbox ends.',
  })
  exposePort(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Body() body: ExposePortRequest, @Req() req: FastifyRequest) {
    return this.sandboxes.exposePort(p, id, body.port, body.public ?? false, publicGatewayUrl(req.headers));
  }

  @Get(':id/shell')
  @ApiOperation({
    summary: 'A shell in the sandbox, on a pty, over a WebSocket',
    description:
      "A WebSocket upgrade (`?cols=&rows=` sizes the terminal): binary messages in are keystrokes, binary messages out are the terminal's output; it closes when the shell exits. Carried over NATS to the sandbox's agent. A plain GET answers 426.",
  })
  async shell(@CurrentPrincipal() p: Principal, @Param('id') id: string): Promise<never> {
    await this.sandboxes.running(p, id);
    throw new HttpException('the shell is a WebSocket: send an upgrade request (tern sandbox shell <id>)', 426);
  }

  @Post(':id/snapshot')
  @ApiOperation({
    summary: "Snapshot the sandbox's filesystem as an image",
    description:
      "Pushes the sandbox's /workspace, as one layer on the image it runs, to the workspace's registry namespace `builds/<workspace id>/snapshots/<name>:<tag>` (name default `sandbox`, tag default `<id>-<ms since epoch>`) and answers 201 `{image, digest, tag}` once pushed: `image` (pinned by digest) is usable as `image` of a new sandbox (whose /workspace starts with these files) or of a deployment. A `host` sandbox's snapshot is its /workspace on Tern's base image (`tern/base:bookworm`): 409 when the registry does not hold it (push it with `sudo tern image base`), or when there is no registry. Processes keep running meanwhile: a file written during the copy may be caught half-written. Answers within 300 s (503 with the reason past it or when the machine fails). Only the workspace can use the image.",
  })
  snapshot(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Body() body: SnapshotRequest) {
    return this.snapshots.snapshot(p, id, body);
  }

  @Post(':id/keepalive')
  @HttpCode(200)
  @ApiOperation({ summary: 'Start the idle timeout again (every call does); 409 when the sandbox has ended' })
  keepalive(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.sandboxes.keepalive(p, id);
  }
}
