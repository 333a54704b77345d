import { writeFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import {
  type CreatedNatsUser,
  type CreateNatsUserRequest,
  INTEGRATOR_SCOPES,
  type IntegratorScope,
  type NatsUserView,
} from '#tern/contracts';
import { formatCreds, newUserKey } from '#tern/nats-auth';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { table } from '../table.js';

function client() {
  return new ApiClient(resolveContext());
}

/** `--allow events,submit` as the scopes the API takes. */
export function scopesFrom(value: string): IntegratorScope[] {
  const scopes = [
    ...new Set(
      value
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  const unknown = scopes.filter((s) => !(INTEGRATOR_SCOPES as readonly string[]).includes(s));
  if (!scopes.length || unknown.length)
    throw new InvalidArgumentError(
      `takes ${INTEGRATOR_SCOPES.join(' and/or ')}, comma-separated${unknown.length ? `, not ${unknown.join(', ')}` : ''}`,
    );
  return scopes as IntegratorScope[];
}

export function renderNatsUsers(users: NatsUserView[]): string {
  return table(
    ['ID', 'NAME', 'WORKSPACE', 'ALLOW', 'CREATED', 'REVOKED'],
    users.map((u) => [u.id, u.name, u.workspaceId, u.scopes.join(','), u.createdAt, u.revokedAt ?? '']),
  );
}

/** `tern nats user create|list|revoke`: integrators' NATS users, scoped to one workspace. */
export function natsCommand(): Command {
  const nats = new Command('nats').description('NATS access for integrators');
  const user = nats.command('user').description("Integrators' NATS users: one workspace's task events and task submission, nothing else");

  user
    .command('create')
    .description('Make a key pair here, have the gateway sign its user JWT, and write a .creds file (workspace admin or operator token)')
    .argument('<name>', 'a label: letters, digits, - or _')
    .requiredOption(
      '--allow <scopes>',
      "events (hear the workspace's task events) and/or submit (submit its tasks), comma-separated",
      scopesFrom,
    )
    .option('--workspace <id>', "the workspace id it acts for (default: the calling token's; another needs an operator token)")
    .option('--out <path>', 'where to write the .creds file (default: ./<name>.creds)')
    .option('--json', 'print the answer (without the seed) as JSON')
    .action(async (name: string, opts: { allow: IntegratorScope[]; workspace?: string; out?: string; json?: boolean }) => {
      // The seed is made and kept here: the gateway sees only the public key.
      const key = newUserKey();
      const request: CreateNatsUserRequest = {
        name,
        allow: opts.allow,
        publicKey: key.publicKey,
        ...(opts.workspace ? { workspace: opts.workspace } : {}),
      };
      const { body } = await client().request<CreatedNatsUser>('POST', '/api/v1/nats/users', request);
      const out = opts.out ?? `${name}.creds`;
      writeFileSync(out, formatCreds(body.jwt, key.seed), { mode: 0o600, flag: 'wx' });
      if (opts.json) {
        console.log(JSON.stringify({ ...body, credsFile: out }, null, 2));
        return;
      }
      console.log(
        [
          `NATS user ${body.name} (${body.scopes.join(', ')}) of workspace ${body.workspaceId}: ${out} (keep it secret; mode 600)`,
          `  servers:      ${body.servers.join(', ')}`,
          `  inboxPrefix:  ${body.inboxPrefix}`,
          ...(body.scopes.includes('events')
            ? [
                `  hear:         ${body.namespace}.notify.task-ended.${body.workspaceId}.v1, ${body.namespace}.task.submitted.${body.workspaceId}.v1, ${body.namespace}.task.cancelled.${body.workspaceId}.v1`,
              ]
            : []),
          ...(body.scopes.includes('submit')
            ? [`  submit:       ${body.namespace}.workspace.${body.workspaceId}.task.submit.v1 (request)`]
            : []),
          'See docs/nats.md, Integrators.',
        ].join('\n'),
      );
    });

  user
    .command('list')
    .description("A workspace's integrator NATS users, revoked ones included")
    .option('--workspace <id>', "a workspace id (default: the calling token's; another needs an operator token)")
    .option('--json', 'print the raw JSON')
    .action(async (opts: { workspace?: string; json?: boolean }) => {
      const query = opts.workspace ? `?workspace=${encodeURIComponent(opts.workspace)}` : '';
      const { body } = await client().get<NatsUserView[]>(`/api/v1/nats/users${query}`);
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderNatsUsers(body));
    });

  user
    .command('revoke')
    .description('Revoke a user at once: NATS disconnects it and refuses its JWT from then on')
    .argument('<id>', 'user id (tern nats user list)')
    .action(async (id: string) => {
      await client().request('DELETE', `/api/v1/nats/users/${encodeURIComponent(id)}`);
      console.log(`NATS user ${id} revoked.`);
    });

  return nats;
}
