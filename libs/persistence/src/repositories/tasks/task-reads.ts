// Tasks as a workspace reads them: one (batched), or a page of its list.
import type { DataSource } from 'typeorm';
import { queryPreparedOn, queryRowsOn } from '../../query-rows.js';
import type { TaskListFilter, TaskWithDeployment } from './task-rows.js';
import { inOrder, type Raw, TASK_COLUMNS, TASK_FROM, withSeq } from './task-sql.js';

/** findInWorkspace for many tasks in one statement. */
export async function findManyInWorkspaces(
  db: DataSource,
  asked: { taskId: string; workspaceId: string }[],
  withResult: boolean,
): Promise<(TaskWithDeployment | undefined)[]> {
  const rows = await queryPreparedOn<Raw<TaskWithDeployment> & { n: string }>(
    db,
    withResult ? 'tasks_find_with_result' : 'tasks_find',
    `SELECT x.n, ${TASK_COLUMNS}${withResult ? ', t.result' : ''}
     FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS x(id, workspace_id, n)
     JOIN tasks t ON t.id = x.id AND t.workspace_id = x.workspace_id JOIN deployments d ON d.id = t.deployment_id`,
    [asked.map((a) => a.taskId), asked.map((a) => a.workspaceId)],
  );
  return inOrder(asked.length, rows, withSeq<TaskWithDeployment>);
}

/** Tasks of the workspace, newest first, at most `limit` (deleted deployments' left out when filtered by name). */
export async function listForWorkspace(
  db: DataSource,
  workspaceId: string,
  filter: TaskListFilter,
  limit: number,
): Promise<TaskWithDeployment[]> {
  const where = ['t.workspace_id = $1'];
  const args: unknown[] = [workspaceId];
  if (filter.deploymentName) {
    args.push(filter.deploymentName);
    where.push(`d.name = $${args.length} AND d.state <> 'deleted'`);
  }
  if (filter.states?.length) {
    args.push(filter.states);
    where.push(`t.state = ANY($${args.length}::text[])`);
  }
  if (filter.before) {
    args.push(filter.before.createdAt, filter.before.id);
    where.push(`(t.created_at, t.id) < ($${args.length - 1}::timestamptz, $${args.length}::uuid)`);
  }
  args.push(limit);
  const rows = await queryRowsOn<Raw<TaskWithDeployment>>(
    db,
    `SELECT ${TASK_COLUMNS} FROM ${TASK_FROM} WHERE ${where.join(' AND ')} ORDER BY t.created_at DESC, t.id DESC LIMIT $${args.length}`,
    args,
  );
  return rows.map((r) => withSeq<TaskWithDeployment>(r));
}
