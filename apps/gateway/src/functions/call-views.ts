import type { CallView, TaskView } from '#tern/contracts';

/** A function call is a task of a function deployment, shown under the names a caller of a function expects. */
export function callView(task: TaskView): CallView {
  return {
    call_id: task.task_id,
    function: task.deployment,
    version: task.version,
    status: task.status,
    done: task.done,
    ...('result' in task ? { result: task.result } : {}),
    error: task.error,
    attempts: task.attempts,
    created_at: task.created_at,
    started_at: task.started_at,
    ended_at: task.ended_at,
  };
}
