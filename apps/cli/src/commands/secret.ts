import { Command } from 'commander';
import { type SecretSummary } from '#tern/contracts';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { ago } from '../format.js';
import { table } from '../table.js';

/** Everything on stdin (a value piped in, so it stays out of the shell's history and `ps`). */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

export function renderSecrets(secrets: SecretSummary[]): string {
  if (!secrets.length) return 'No secrets yet. Add one with: tern secret set NAME (the value on stdin)';
  return table(
    ['NAME', 'SIZE', 'UPDATED'],
    secrets.map((s) => [s.name, `${s.bytes} bytes`, ago(s.updatedAt)]),
  );
}

export function secretCommand(): Command {
  const client = () => new ApiClient(resolveContext());
  const secret = new Command('secret').description(
    "The workspace's secrets, sealed at rest and never shown again (a spec's registry_secret: names one holding <username>:<password>)",
  );

  secret
    .command('set')
    .argument('<name>', 'letters, digits, _ . or -')
    .argument('[value]', 'the value; without it, read from stdin (keeps it out of the shell history)')
    .description('Create or replace a secret')
    .action(async (name: string, value: string | undefined) => {
      const given = value ?? (await readStdin());
      const { body } = await client().request<SecretSummary & { replaced: boolean }>('PUT', `/api/v1/secrets/${encodeURIComponent(name)}`, {
        value: given,
      });
      console.log(`secret ${body.name} ${body.replaced ? 'replaced' : 'created'} (${body.bytes} bytes)`);
    });

  secret
    .command('list')
    .description("The workspace's secrets: names, sizes and dates, never values")
    .option('--json', 'print the raw JSON')
    .action(async (opts: { json?: boolean }) => {
      const { body } = await client().get<SecretSummary[]>('/api/v1/secrets');
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderSecrets(body));
    });

  secret
    .command('rm')
    .argument('<name>')
    .description('Delete a secret')
    .action(async (name: string) => {
      await client().request('DELETE', `/api/v1/secrets/${encodeURIComponent(name)}`);
      console.log(`secret ${name} deleted`);
    });

  return secret;
}
