import { defineContract } from '../contract.js';
import { InvokeHead, InvokeResponseHead } from '../invoke/invoke.js';

/**
 * The sandbox API inside one sandbox, carried like an endpoint invoke (same head, same streamed
 * response, same large-body path) but answered by the agent itself, not by a container's server.
 */
export const SANDBOX_CALL = defineContract({
  subject: 'tern.agent.*.sandbox.call.*.v1',
  kind: 'request',
  payload: InvokeHead,
  reply: InvokeResponseHead,
  description: [
    "A call of the sandbox API (processes, files) for one sandbox. Tokens: machine id, sandbox id (only that machine's agent may hear it). Sent by the gateway once it checked the caller's workspace owns the sandbox; answered by the agent, which runs the process or touches the file inside the sandbox's container. The machine needs no inbound port.",
    "Same protocol as tern.agent.*.invoke.*.v1 (InvokeHead in `Tern-Invoke`, `deploymentId` holding the sandbox id; the response streamed in `Tern-Seq` messages, `Tern-End`, `Tern-Error`); the path is the agent's sandbox route: `POST /exec`, `GET /processes`, `GET /processes/<pid>`, `POST /processes/<pid>/stdin`, `DELETE /processes/<pid>`, `GET|PUT|DELETE /files?path=`, `GET /files/list?path=`, `GET /files/stat?path=`, `POST /files/mkdir?path=`, `POST /shells/<tunnelId>/resize` (a ShellResize body: the pty of that shell tunnel takes the new size).",
  ].join('\n\n'),
});
