import { Command } from 'commander';
import { TERN_VERSION } from '#tern/config';
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
import { workspaceCommand } from './commands/workspace.js';

/** The `tern` command and every subcommand, as `main.ts` runs it and the docs' check reads it. */
export function ternProgram(): Command {
  return new Command('tern')
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
    .addCommand(workspaceCommand())
    .addCommand(tokenCommand())
    .addCommand(natsCommand())
    .addCommand(usageCommand())
    .addCommand(sandboxCommand())
    .addCommand(volumeCommand())
    .addCommand(secretCommand());
}
