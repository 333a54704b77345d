import { Command } from 'commander';
import type { DeploymentDetail, DeploymentSummary, VersionView } from '#tern/contracts';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { ago } from '../format.js';
import { table } from '../table.js';

function client() {
  return new ApiClient(resolveContext());
}

export function renderDeployments(list: DeploymentSummary[]): string {
  if (!list.length) return 'No deployments yet: tern deploy examples/hello-python/tern.yaml';
  return table(
    ['NAME', 'KIND', 'VERSION', 'STATE', 'DESIRED', 'ACTUAL', 'REASON'],
    list.map((d) => [d.name, d.kind, String(d.version), d.state, String(d.desired), String(d.actual), d.reason ?? '']),
  );
}

/** A version's crash loop: its count, its last crash (where, how, exit code), the next start, its last lines. */
function renderCrashLoop(v: VersionView): string[] {
  const c = v.crashLoop;
  if (!c) return [];
  const exit = c.exitCode === null ? '' : `, exit code ${c.exitCode}`;
  return [
    '',
    `v${v.version}: ${c.state}: ${c.crashes} container(s) crashed in a row; last ${ago(c.lastCrashAt)} (${c.phase}: ${c.error}${exit}); next start ${new Date(c.nextStartAt) > new Date() ? `at ${c.nextStartAt}` : 'due'}`,
    ...(c.lastLines.length ? ['  last lines:', ...c.lastLines.map((l) => `    ${l}`)] : []),
  ];
}

export function renderDeployment(d: DeploymentDetail): string {
  const out = [
    renderDeployments([d]),
    '',
    `URL: ${d.url}`,
    '',
    table(
      ['VERSION', 'DESIRED', 'ACTUAL', 'CREATED', 'REASON'],
      d.versions.map((v) => [
        `v${v.version}${v.latest ? ' (latest)' : ''}`,
        String(v.desired),
        String(v.actual),
        ago(v.createdAt),
        v.placementReason ?? v.crashLoop?.state ?? '',
      ]),
    ),
    ...d.versions.flatMap(renderCrashLoop),
  ];
  if (d.containers.length) {
    out.push(
      '',
      table(
        ['CONTAINER', 'VERSION', 'MACHINE', 'STATE', 'REASON'],
        d.containers.map((c) => [c.id, `v${c.version}`, c.machineId ?? '-', c.state, c.reason ?? '']),
      ),
    );
  }
  return out.join('\n');
}

export function deploymentsCommand(): Command {
  return new Command('deployments')
    .description("The workspace's deployments, or one in detail: versions, containers, why desired is not met")
    .argument('[name]', 'one deployment')
    .option('--json', 'print the raw JSON')
    .action(async (name: string | undefined, opts: { json?: boolean }) => {
      if (name) {
        const { body } = await client().get<DeploymentDetail>(`/api/v1/deployments/${encodeURIComponent(name)}`);
        console.log(opts.json ? JSON.stringify(body, null, 2) : renderDeployment(body));
      } else {
        const { body } = await client().get<DeploymentSummary[]>('/api/v1/deployments');
        console.log(opts.json ? JSON.stringify(body, null, 2) : renderDeployments(body));
      }
    });
}

export function deploymentCommand(): Command {
  const deployment = new Command('deployment').description('Stop, start or delete a deployment');
  const act = (action: 'stop' | 'start' | 'delete', description: string, done: string) =>
    deployment
      .command(action)
      .description(description)
      .argument('<name>')
      .option('--json', 'print the raw JSON')
      .action(async (name: string, opts: { json?: boolean }) => {
        const path = `/api/v1/deployments/${encodeURIComponent(name)}${action === 'delete' ? '' : `/${action}`}`;
        const { body } = await client().request(action === 'delete' ? 'DELETE' : 'POST', path);
        console.log(opts.json ? JSON.stringify(body, null, 2) : `${name} ${done}.`);
      });
  act('stop', 'Stop: containers wind down, requests are answered 503 until started', 'stopped');
  act('start', 'Start a stopped deployment again', 'started');
  act('delete', 'Delete: containers wind down and the name disappears (deploying it again continues its versions)', 'deleted');
  return deployment;
}
