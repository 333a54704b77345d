/** The answers of the deployments API: one definition, shared with the CLI. */
export type { ContainerView, DeploymentDetail, DeploymentSummary, DeployResult, VersionView } from '#tern/contracts';

/** Where a deployment is called: `/taskqueue/<name>` takes a task queue's tasks, `/function/<name>` a function's calls, `/endpoint/<name>` anything else. */
export function deploymentUrl(base: string, name: string, kind: string): string {
  return `${base}/${kind === 'task_queue' ? 'taskqueue' : kind === 'function' ? 'function' : 'endpoint'}/${name}`;
}
