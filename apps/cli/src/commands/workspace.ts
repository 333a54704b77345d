import { Command } from 'commander';
import type { WorkspaceDeleted } from '#tern/contracts';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { table } from '../table.js';

interface WorkspaceRow {
  id: string;
  name: string;
  createdAt: string;
}

function client() {
  return new ApiClient(resolveContext());
}

/** What a workspace delete took with it, one line per kind, then any step that failed. */
export function renderDeleted(d: WorkspaceDeleted): string {
  const lines = [
    `Workspace ${d.name} (${d.id}) deleted; its usage is kept.`,
    `  tokens revoked:        ${d.revokedTokens}`,
    `  NATS users revoked:    ${d.revokedNatsUsers}`,
    `  deployments deleted:   ${d.deletedDeployments} (containers wind down, unfinished tasks cancelled)`,
    `  sandboxes terminated:  ${d.terminatedSandboxes}`,
    `  secrets destroyed:     ${d.destroyedSecrets}`,
    `  volumes deleted:       ${d.deletedVolumes}`,
    `  images deleted:        ${d.deletedImages}`,
  ];
  if (d.problems.length) lines.push('Not finished (finish these by hand):', ...d.problems.map((p) => `  ${p}`));
  return lines.join('\n');
}

export function workspaceCommand(): Command {
  const workspace = new Command('workspace').description('Workspaces (operator token): list, create, delete');

  workspace
    .command('list')
    .description('Every workspace not deleted')
    .option('--json', 'print the raw JSON')
    .action(async (opts: { json?: boolean }) => {
      const { body } = await client().get<WorkspaceRow[]>('/api/v1/workspaces');
      console.log(
        opts.json
          ? JSON.stringify(body, null, 2)
          : table(
              ['ID', 'NAME', 'CREATED'],
              body.map((w) => [w.id, w.name, w.createdAt]),
            ),
      );
    });

  workspace
    .command('create')
    .description('Create a workspace and its first admin token, printed once')
    .argument('<name>', '2-63 lower-case letters, digits or -')
    .action(async (name: string) => {
      const { body } = await client().request<{ workspace: WorkspaceRow; token: string }>('POST', '/api/v1/workspaces', { name });
      console.log(`Workspace ${body.workspace.name} (${body.workspace.id}) created; its admin token is shown only now:\n\n  ${body.token}`);
    });

  workspace
    .command('rm')
    .description(
      'Delete a workspace and what it holds: tokens, NATS users, deployments, sandboxes, secrets, volumes, its images; its usage is kept',
    )
    .argument('<id>', 'workspace id (tern workspace list)')
    .option('--json', 'print the raw JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const { body } = await client().request<WorkspaceDeleted>('DELETE', `/api/v1/workspaces/${encodeURIComponent(id)}`);
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderDeleted(body));
      if (body.problems.length) process.exitCode = 1;
    });

  return workspace;
}
