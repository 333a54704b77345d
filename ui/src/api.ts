// The dashboard reads only the public API, with the token the operator or member signed in with:
// what a page shows is what the API lets that token see.
import { createParser } from 'eventsource-parser';

export type {
  ContainerView,
  DeploymentDetail,
  DeploymentSummary,
  MachineDetail,
  MachineReputation,
  MachineStateChanges,
  MachineSummary,
  RequestHistory,
  RewardsReport,
  ScaleHistory,
  SystemHealth,
  TaskList,
  TaskStats,
  TaskView,
  UsageReport,
  UsageRow,
} from '../../libs/contracts/src/http/index.js';
export { TASK_STATES } from '../../libs/contracts/src/domain.js';

const TOKEN_KEY = 'tern.token';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const session = {
  token: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  signIn: (token: string) => sessionStorage.setItem(TOKEN_KEY, token),
  signOut: () => sessionStorage.removeItem(TOKEN_KEY),
};

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const token = session.token();
  return { ...(token ? { authorization: `Bearer ${token}` } : {}), ...extra };
}

async function failure(res: Response): Promise<ApiError> {
  const text = await res.text();
  let message = text || res.statusText;
  try {
    const body = JSON.parse(text) as { message?: string | string[] };
    if (body.message) message = Array.isArray(body.message) ? body.message.join('; ') : body.message;
  } catch {
    // not JSON: the text itself is the message
  }
  return new ApiError(res.status, message);
}

/** GET a JSON answer; any other status is an ApiError with the API's message. */
export async function get<T>(path: string, signal?: AbortSignal): Promise<T> {
  const res = await fetch(path, { headers: headers(), signal });
  if (!res.ok) throw await failure(res);
  return (await res.json()) as T;
}

/** GET as a file the browser saves (the usage CSV). */
export async function download(path: string, filename: string): Promise<void> {
  const res = await fetch(path, { headers: headers({ accept: 'text/csv' }) });
  if (!res.ok) throw await failure(res);
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.click();
  URL.revokeObjectURL(url);
}

/**
 * Follows a server-sent event stream (EventSource cannot send the Authorization header, so this
 * reads fetch's body): calls `onEvent` per event until `signal` aborts or the server ends it.
 */
export async function follow(path: string, onEvent: (event: string, data: string) => void, signal: AbortSignal): Promise<void> {
  const res = await fetch(path, { headers: headers({ accept: 'text/event-stream' }), signal });
  if (!res.ok || !res.body) throw await failure(res);
  const parser = createParser({ onEvent: (e) => onEvent(e.event ?? 'message', e.data) });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    parser.feed(value);
  }
}
