import { TERN_CONFIG } from '#tern/config';
import { type DeploymentSpec } from '#tern/contracts';
import {
  CodeBundlesRepository,
  type Deployment,
  DeploymentsRepository,
  MachinesRepository,
  SecretsRepository,
  VolumesRepository,
} from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { ImagePins } from '../images/image-pins.service.js';
import { TasksService } from '../tasks/tasks.service.js';
import { DeploymentRecords } from './deployment-records.js';
import { DeploymentsService } from './deployments.service.js';

const principal: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 'tok1', role: 'admin' };
const CODE = `sha256:${'a'.repeat(64)}`;
const spec = (over: Partial<DeploymentSpec> = {}): DeploymentSpec =>
  ({ name: 'echo', kind: 'endpoint', image: 'python:3.12-slim', handler: 'app.py:echo', code: CODE, ...over }) as DeploymentSpec;

async function deployments() {
  const { sut, fake } = await newTestService(DeploymentsService, [
    [TERN_CONFIG, { containers: { crashBackoff: { firstMs: 1000, maxMs: 60_000 } } }],
  ]);
  const repo = fake(DeploymentsRepository);
  repo.addVersion.mockResolvedValue({ deployment: { id: 'd1' } as Deployment, version: 4 } as never);
  const machines = fake(MachinesRepository);
  machines.listPools.mockResolvedValue([{ name: 'default', allowedGpuTypes: [] }] as never);
  fake(CodeBundlesRepository).isOwnedBy.mockResolvedValue(true);
  const pins = fake(ImagePins);
  pins.pin.mockImplementation(async (ref) => `${ref}@sha256:${'b'.repeat(64)}`);
  pins.isPrivate.mockReturnValue(false);
  return {
    sut,
    repo,
    pins,
    machines,
    records: fake(DeploymentRecords),
    volumes: fake(VolumesRepository),
    secrets: fake(SecretsRepository),
    codeBundles: fake(CodeBundlesRepository),
    tasks: fake(TasksService),
  };
}

/** The spec a deploy stored (its resolved form, with what was submitted). */
const stored = (repo: Awaited<ReturnType<typeof deployments>>['repo']) => repo.addVersion.mock.calls[0][3] as Record<string, unknown>;

describe('DeploymentsService.deploy', () => {
  it('stores the resolved spec with its image pinned by digest, publishes the record and answers the new version', async () => {
    const { sut, repo, records } = await deployments();
    const result = await sut.deploy(principal, spec(), 'https://tern.example');
    expect(result).toMatchObject({ name: 'echo', version: 4, deploymentId: 'd1', url: 'https://tern.example/endpoint/echo' });
    expect(repo.addVersion).toHaveBeenCalledWith('w1', 'echo', 'endpoint', expect.anything());
    expect(stored(repo)).toMatchObject({ image: `python:3.12-slim@sha256:${'b'.repeat(64)}`, verifiedOnly: false, submitted: spec() });
    expect(records.write).toHaveBeenCalledWith('d1');
  });

  it('refuses a spec that breaks its own rules with a 400 naming the field, storing nothing', async () => {
    const { sut, repo } = await deployments();
    await expect(sut.deploy(principal, spec({ command: ['serve'] }), '')).rejects.toMatchObject({
      status: 400,
      response: { message: [expect.stringMatching(/^command.*together with handler/)] },
    });
    expect(repo.addVersion).not.toHaveBeenCalled();
  });

  it("refuses another workspace's code bundle as not found: a digest is not a key to someone's code", async () => {
    const { sut, repo, codeBundles } = await deployments();
    codeBundles.isOwnedBy.mockResolvedValue(false);
    await expect(sut.deploy(principal, spec(), '')).rejects.toMatchObject({
      status: 404,
      message: expect.stringMatching(/^code sha256:a+ not found in workspace "team": upload it first/),
    });
    expect(codeBundles.isOwnedBy).toHaveBeenCalledWith('w1', CODE);
    expect(repo.addVersion).not.toHaveBeenCalled();
  });

  it('refuses a volume the workspace does not have, naming it and how to create it', async () => {
    const { sut, repo, volumes } = await deployments();
    volumes.find.mockImplementation(async (_w, name) => (name === 'weights' ? ({ name } as never) : undefined));
    const mounts = [
      { name: 'weights', mount_path: '/weights' },
      { name: 'cache', mount_path: '/cache' },
    ];
    await expect(sut.deploy(principal, spec({ volumes: mounts }), '')).rejects.toMatchObject({
      status: 400,
      response: { message: ['volumes[1].name: volume cache not found in workspace "team": create it first (tern volume create cache)'] },
    });
    expect(volumes.find).toHaveBeenCalledWith('w1', 'cache');
    expect(repo.addVersion).not.toHaveBeenCalled();
  });

  it('refuses secrets the workspace has not set, naming every one missing', async () => {
    const { sut, repo, secrets } = await deployments();
    secrets.existing.mockResolvedValue(['HF_TOKEN']);
    await expect(sut.deploy(principal, spec({ secrets: ['HF_TOKEN', 'OPENAI_KEY', 'DB_URL'] }), '')).rejects.toMatchObject({
      status: 400,
      response: { message: [expect.stringMatching(/^secrets: OPENAI_KEY, DB_URL not found in workspace "team"/)] },
    });
    expect(repo.addVersion).not.toHaveBeenCalled();
  });

  it('refuses a GPU no pool or machine offers, before storing anything', async () => {
    const { sut, repo, machines } = await deployments();
    machines.gpuOffers.mockResolvedValue([{ pool: 'default', gpus: [{ model: 'NVIDIA A100-SXM4-80GB' }] }] as never);
    await expect(sut.deploy(principal, spec({ gpu: 'H100' }), '')).rejects.toMatchObject({
      status: 400,
      response: { message: [expect.stringMatching(/H100/)] },
    });
    expect(repo.addVersion).not.toHaveBeenCalled();
  });

  it('asks for verified machines for volumes or a private image, unless the placement opts out', async () => {
    const volumesCase = await deployments();
    volumesCase.volumes.find.mockResolvedValue({ name: 'weights' } as never);
    await volumesCase.sut.deploy(principal, spec({ volumes: [{ name: 'weights', mount_path: '/w' }] }), '');
    expect(stored(volumesCase.repo)).toMatchObject({ verifiedOnly: true });

    const privateCase = await deployments();
    privateCase.pins.isPrivate.mockReturnValue(true);
    await privateCase.sut.deploy(principal, spec(), '');
    expect(stored(privateCase.repo)).toMatchObject({ verifiedOnly: true });

    const optedOut = await deployments();
    optedOut.pins.isPrivate.mockReturnValue(true);
    await optedOut.sut.deploy(principal, spec({ placement: { verified: false } }), '');
    expect(stored(optedOut.repo)).toMatchObject({ verifiedOnly: false });
  });

  it('answers 503 saying the version is saved when NATS does not take the record', async () => {
    const { sut, repo, records } = await deployments();
    records.write.mockRejectedValue(new Error('no responders'));
    await expect(sut.deploy(principal, spec(), '')).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/^deployed echo v4 is saved, but NATS did not take the deployment record \(no responders\)/),
    });
    expect(repo.addVersion).toHaveBeenCalledTimes(1);
  });
});

describe('DeploymentsService.setState', () => {
  const row = (over: Partial<Deployment> = {}) =>
    ({ id: 'd1', name: 'q', kind: 'task_queue', state: 'ready', latestVersion: 3, ...over }) as Deployment;

  it('records who stopped a deployment and when, and publishes it', async () => {
    const { sut, repo, records, tasks } = await deployments();
    repo.findByName.mockResolvedValue(row());
    repo.setState.mockImplementation(async (d, state) => ({ ...d, state }) as Deployment);
    await sut.setState(principal, 'q', 'stop');
    expect(repo.setState).toHaveBeenCalledWith(
      expect.objectContaining({ id: 'd1' }),
      'stopped',
      expect.stringMatching(/^stopped by token tok1 at /),
    );
    expect(records.write).toHaveBeenCalledWith('d1');
    expect(tasks.dropQueue).not.toHaveBeenCalled();
  });

  it("drops a deleted task queue's tasks; a deleted endpoint has none", async () => {
    const { sut, repo, tasks } = await deployments();
    repo.findByName.mockResolvedValue(row());
    repo.setState.mockImplementation(async (d, state) => ({ ...d, state }) as Deployment);
    await sut.setState(principal, 'q', 'delete');
    expect(tasks.dropQueue).toHaveBeenCalledWith('d1', 3);

    tasks.dropQueue.mockClear();
    repo.findByName.mockResolvedValue(row({ kind: 'endpoint' }));
    await sut.setState(principal, 'q', 'delete');
    expect(tasks.dropQueue).not.toHaveBeenCalled();
  });

  it('answers 404 for a deleted deployment, as for one that never was', async () => {
    const { sut, repo } = await deployments();
    repo.findByName.mockResolvedValue(row({ state: 'deleted' }));
    await expect(sut.setState(principal, 'q', 'start')).rejects.toMatchObject({
      status: 404,
      message: 'deployment "q" not found in workspace "team"',
    });
    expect(repo.setState).not.toHaveBeenCalled();
  });
});
