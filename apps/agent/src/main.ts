// `node dist/apps/agent/src/main.js` runs the agent as the other services run (npm run up,
// the integration tests); bin/tern-agent.js is the full command line (cli.ts).
import { runAgent } from './run-agent.js';

await runAgent();
