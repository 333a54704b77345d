import { Body, Controller, Delete, Get, Param, Post, Put, Query, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ExecRequest, StdinRequest } from '#tern/contracts';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { SandboxPathQuery } from './dto/sandbox-path.query.js';
import { SandboxCallsService } from './sandbox-calls.service.js';

const json = (value: object) => Buffer.from(JSON.stringify(value));

/** Processes and files of a running sandbox: each call goes to its agent over NATS (404 unknown, 409 ended). */
@ApiTags('sandboxes')
@ApiBearerAuth()
@Controller('api/v1/sandboxes/:id')
export class SandboxCallsController {
  constructor(private readonly calls: SandboxCallsService) {}

  @Post('exec')
  @ApiOperation({
    summary: 'Run a process in the sandbox',
    description:
      'Body: `cmd` (a list of strings) or `code` with `language` (python, node, bash); `cwd`, `env`, `stdin`, `timeout` (s). Answers 200 with NDJSON as the process runs: `{"pid"}` first (also in `x-tern-process-id`), then `{"stream":"stdout"|"stderr","data"}` as output comes, then `{"exit_code","signal"}`. Closing the connection does not stop the process (DELETE …/processes/<pid> does).',
  })
  exec(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Body() request: ExecRequest, @Res() reply: FastifyReply) {
    const timeoutMs = request.timeout ? request.timeout * 1000 + 5000 : undefined;
    return this.calls.forward(p, id, { method: 'POST', route: '/exec', body: json(request), ...(timeoutMs ? { timeoutMs } : {}) }, reply);
  }

  @Get('processes')
  @ApiOperation({ summary: "The sandbox's processes (running, and the last 100 ended): pid, cmd, state, exit code" })
  processes(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Res() reply: FastifyReply) {
    return this.calls.forward(p, id, { method: 'GET', route: '/processes' }, reply);
  }

  @Get('processes/:pid')
  @ApiOperation({ summary: 'One process: state, exit code and its output so far (the last MiB of each stream)' })
  process(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Param('pid') pid: string, @Res() reply: FastifyReply) {
    return this.calls.forward(p, id, { method: 'GET', route: `/processes/${encodeURIComponent(pid)}` }, reply);
  }

  @Post('processes/:pid/stdin')
  @ApiOperation({ summary: "Write to a process's stdin (`{data, close}`); 409 when it has ended" })
  stdin(
    @CurrentPrincipal() p: Principal,
    @Param('id') id: string,
    @Param('pid') pid: string,
    @Body() request: StdinRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.calls.forward(p, id, { method: 'POST', route: `/processes/${encodeURIComponent(pid)}/stdin`, body: json(request) }, reply);
  }

  @Delete('processes/:pid')
  @ApiOperation({ summary: 'Kill a process (SIGKILL); answers once it has ended; 409 when it had already' })
  kill(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Param('pid') pid: string, @Res() reply: FastifyReply) {
    return this.calls.forward(p, id, { method: 'DELETE', route: `/processes/${encodeURIComponent(pid)}` }, reply);
  }

  @Get('files')
  @ApiOperation({
    summary: "A file's bytes; 404 missing, 400 a directory. Paths are absolute or relative to the workdir, never through `..`",
  })
  read(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() q: SandboxPathQuery, @Res() reply: FastifyReply) {
    return this.calls.forward(p, id, { method: 'GET', route: '/files', path: q.path }, reply);
  }

  @Put('files')
  @ApiOperation({ summary: 'Write a file (the body, bytes, at most 64 MiB: 413 past it); parent directories are created' })
  write(
    @CurrentPrincipal() p: Principal,
    @Param('id') id: string,
    @Query() q: SandboxPathQuery,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    return this.calls.forward(p, id, { method: 'PUT', route: '/files', path: q.path, body }, reply);
  }

  @Delete('files')
  @ApiOperation({ summary: 'Delete a file or a directory with what it holds; 404 when missing' })
  remove(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() q: SandboxPathQuery, @Res() reply: FastifyReply) {
    return this.calls.forward(p, id, { method: 'DELETE', route: '/files', path: q.path }, reply);
  }

  @Get('files/list')
  @ApiOperation({ summary: "A directory's entries: name, type, size, mode, mtime" })
  list(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() q: SandboxPathQuery, @Res() reply: FastifyReply) {
    return this.calls.forward(p, id, { method: 'GET', route: '/files/list', path: q.path }, reply);
  }

  @Get('files/stat')
  @ApiOperation({ summary: 'One entry: name, type (file, directory, symlink), size, mode, mtime' })
  stat(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() q: SandboxPathQuery, @Res() reply: FastifyReply) {
    return this.calls.forward(p, id, { method: 'GET', route: '/files/stat', path: q.path }, reply);
  }

  @Post('files/mkdir')
  @ApiOperation({ summary: 'Create a directory and its parents' })
  mkdir(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() q: SandboxPathQuery, @Res() reply: FastifyReply) {
    return this.calls.forward(p, id, { method: 'POST', route: '/files/mkdir', path: q.path }, reply);
  }
}
