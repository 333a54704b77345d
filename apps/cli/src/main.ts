import { Command } from 'commander';
import { TERN_VERSION } from '#tern/config';
import { ApiError } from './api-client.js';
import { deployCommand } from './commands/deploy.js';
import { deploymentCommand, deploymentsCommand } from './commands/deployments.js';
import { imageCommand } from './commands/image.js';
import { invokeCommand } from './commands/invoke.js';
import { logsCommand } from './commands/logs.js';
import { mapCommand } from './commands/map.js';
import { machineCommand } from './commands/machine.js';
import { natsCommand } from './commands/nats.js';
import { poolCommand } from './commands/pool.js';
import { sandboxCommand } from './commands/sandbox.js';
import { runCommand } from './commands/run.js';
import { scheduleCommand } from './commands/schedule.js';
import { statusCommand } from './commands/status.js';
import { taskCommand } from './commands/task.js';
import { tokenCommand } from './commands/token.js';
import { usageCommand } from './commands/usage.js';
import { secretCommand } from './commands/secret.js';
import { volumeCommand } from './commands/volume.js';

const program = new Command('tern')
  .description('Tern: serverless GPU runtime. Configure with ~/.tern/config.json (npm run up writes it) or TERN_GATEWAY / TERN_TOKEN.')
  .version(TERN_VERSION)
  .addCommand(statusCommand())
  .addCommand(machineCommand())
  .addCommand(poolCommand())
  .addCommand(deployCommand())
  .addCommand(deploymentsCommand())
  .addCommand(deploymentCommand())
  .addCommand(imageCommand())
  .addCommand(invokeCommand())
  .addCommand(taskCommand())
  .addCommand(runCommand())
  .addCommand(mapCommand())
  .addCommand(scheduleCommand())
  .addCommand(logsCommand())
  .addCommand(tokenCommand())
  .addCommand(natsCommand())
  .addCommand(usageCommand())
  .addCommand(sandboxCommand())
  .addCommand(volumeCommand())
  .addCommand(secretCommand());

try {
  await program.parseAsync(process.argv);
} catch (e) {
  process.stderr.write(`tern: ${e instanceof ApiError ? e.message : (e as Error).message}\n`);
  process.exit(1);
}
