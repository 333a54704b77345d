import { Command } from 'commander';
import { TERN_VERSION } from '#tern/config';
import {
  AgentConfigError,
  type AgentConfigFile,
  configPath,
  defaultStateDir,
  readConfigFile,
  setConfigValue,
  showConfig,
  validateConfig,
  writeConfigFile,
} from './settings/config-file.js';
import { caProblem, keepCa } from './settings/ca-file.js';
import { EXIT_CONFIG } from './exit-codes.js';

/** The agent itself is loaded only to run it: init and config stay quick. */
async function runAgent(options: { stateDir?: string }) {
  const { runAgent: run } = await import('./run-agent.js');
  await run(options);
}

function stateDirOf(opts: { stateDir?: string }): string {
  return opts.stateDir ?? defaultStateDir();
}

function existing(stateDir: string): AgentConfigFile {
  const file = readConfigFile(stateDir);
  if (!file)
    throw new AgentConfigError([
      `no configuration at ${configPath(stateDir)}: run \`tern-agent init --gateway URL --token TOKEN --pool POOL\` first`,
    ]);
  return file;
}

const stateDirOption = [
  '--state-dir <dir>',
  "where config.yaml and the agent's state live (default $AGENT_STATE_DIR or ~/.tern-agent)",
] as const;

const program = new Command('tern-agent')
  .description(
    'The Tern node agent: registers this machine with a gateway, heartbeats, runs containers.\n' +
      'Without a command it runs the agent (a live dashboard on a terminal, JSON logs otherwise).',
  )
  .version(TERN_VERSION)
  .option(...stateDirOption)
  .action(async (opts: { stateDir?: string }) => runAgent({ stateDir: opts.stateDir }));

program
  .command('run')
  .description('run the agent (the default)')
  .option(...stateDirOption)
  .action(async (opts: { stateDir?: string }) => runAgent({ stateDir: opts.stateDir ?? program.opts().stateDir }));

program
  .command('init')
  .description('write config.yaml for this machine')
  .requiredOption('--gateway <url>', 'gateway URL, e.g. https://tern.example.com')
  .requiredOption('--token <token>', 'join token from `tern machine create` (or an operator API token)')
  .option('--pool <pool>', 'pool to join', 'default')
  .option('--machine-id <id>', 'machine id (default: the one the token names, or one derived from the host name)')
  .option('--ca <file>', "CA certificate (PEM) to pin for the gateway's HTTPS and NATS's TLS (kept as <state dir>/ca.pem)")
  .option('--builder', "this machine builds images from deployments' image specs (needs runc, umoci, skopeo, outbound network)")
  .option('--site-cache <url>', "read volume chunks through this site's cache (a `tern-agent site-cache`, http://host:port)")
  .option(...stateDirOption)
  .action(
    (opts: {
      gateway: string;
      token: string;
      pool: string;
      machineId?: string;
      ca?: string;
      builder?: boolean;
      siteCache?: string;
      stateDir?: string;
    }) => {
      const stateDir = opts.stateDir ?? stateDirOf(program.opts());
      const problem = opts.ca ? caProblem(opts.ca) : undefined;
      if (problem) throw new AgentConfigError([`--ca: ${problem}`]);
      const config = validateConfig(
        {
          gateway: opts.gateway,
          token: opts.token,
          pool: opts.pool,
          ...(opts.machineId ? { machineId: opts.machineId } : {}),
          ...(opts.ca ? { ca: keepCa(stateDir, opts.ca) } : {}),
          ...(opts.builder ? { builder: 'true' } : {}),
          ...(opts.siteCache ? { siteCache: opts.siteCache } : {}),
        },
        'init',
      );
      const path = writeConfigFile(stateDir, config);
      process.stdout.write(`wrote ${path}\nstart the agent with: tern-agent${opts.stateDir ? ` --state-dir ${opts.stateDir}` : ''}\n`);
    },
  );

program
  .command('rotate-token')
  .description(
    "replace this machine's token with a new one from the gateway (the old one stops working at once); config.yaml keeps the new one",
  )
  .option(...stateDirOption)
  .action(async (opts: { stateDir?: string }) => {
    const stateDir = opts.stateDir ?? stateDirOf(program.opts());
    const { rotateMachineToken } = await import('./registration/rotate-token.js');
    const file = existing(stateDir);
    if (file.ca) (await import('./settings/pinned-ca.js')).pinGatewayCa(file.gateway, file.ca);
    const { machineId, path } = await rotateMachineToken(stateDir, file);
    process.stdout.write(`machine ${machineId}: new token saved in ${path}; a running agent uses it when it next registers\n`);
  });

program
  .command('site-cache')
  .description(
    "serve the machines of this site volume chunks and image layers from one copy: a read-through cache in front of Tern's registry, which still decides each machine's access (machines name it with `tern-agent config set siteCache URL`)",
  )
  .requiredOption(
    '--store <url>',
    "Tern's registry (volumes and images) as the gateway and image references name it, e.g. https://registry.example.com",
  )
  .option('--listen <host:port>', 'where the machines of the site reach it', '0.0.0.0:5080')
  .option('--dir <dir>', 'where blobs are kept (default <state dir>/site-cache)')
  .option('--max-gb <gb>', 'most GB kept; least recently used blobs go first', '100')
  .option(...stateDirOption)
  .action(async (opts: { store: string; listen: string; dir?: string; maxGb: string; stateDir?: string }) => {
    const { defaultSiteCacheDir, runSiteCache } = await import('./site-cache.js');
    const dir = opts.dir ?? defaultSiteCacheDir(opts.stateDir ?? stateDirOf(program.opts()));
    await runSiteCache({ store: opts.store, listen: opts.listen, dir, maxGb: opts.maxGb });
  });

const config = program.command('config').description('show or change config.yaml');

config
  .command('show')
  .description('print the configuration (the token masked)')
  .option(...stateDirOption)
  .action((opts: { stateDir?: string }) => {
    const stateDir = opts.stateDir ?? stateDirOf(program.opts());
    process.stdout.write(`# ${configPath(stateDir)}\n${showConfig(existing(stateDir))}`);
  });

config
  .command('set')
  .description('change one key: gateway, token, pool, machineId, runtime, dashboard (an empty value removes an optional key)')
  .argument('<key>')
  .argument('<value>')
  .option(...stateDirOption)
  .action((key: string, value: string, opts: { stateDir?: string }) => {
    const stateDir = opts.stateDir ?? stateDirOf(program.opts());
    const next = setConfigValue(existing(stateDir), key, value);
    writeConfigFile(stateDir, next);
    process.stdout.write(`${key} set in ${configPath(stateDir)}\n`);
  });

try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (e instanceof AgentConfigError) {
    process.stderr.write(`tern-agent: ${e.problems.join('\n  ')}\n`);
    process.exit(EXIT_CONFIG);
  }
  process.stderr.write(`tern-agent: ${(e as Error).message}\n`);
  process.exit(1);
}
