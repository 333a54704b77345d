import { AGENT_SANDBOX_CREATE, AGENT_SANDBOX_REMOVE, SANDBOX_ENDED, SANDBOX_STARTED, type SandboxSpec } from '#tern/contracts';
import { Messaging, RequestError } from '#tern/messaging';
import { type EndingSandbox, type Sandbox, SandboxesRepository, VolumesRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { ImagePins } from '../images/image-pins.service.js';
import { SandboxPlacer } from './sandbox-placer.js';
import { SandboxesService } from './sandboxes.service.js';

const principal: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 't1', role: 'admin' };
const resources = { cpuMillicores: 1000, memoryBytes: 512 * 2 ** 20, gpuCount: 0 };

/** A sandbox row as the repository reads it. */
function row(over: Partial<Sandbox> = {}): Sandbox {
  const at = new Date('2026-01-01T00:00:00Z');
  return {
    id: 'sb-1',
    workspaceId: 'w1',
    machineId: 'm1',
    pool: 'default',
    state: 'running',
    stateReason: null,
    spec: { image: 'host' },
    requested: resources,
    timeoutSeconds: 600,
    idleTimeoutSeconds: null,
    ports: [],
    publicPorts: {},
    createdAt: at,
    startedAt: at,
    activeAt: at,
    endedAt: null,
    ...over,
  } as Sandbox;
}

const ending = (over: Partial<EndingSandbox> = {}): EndingSandbox => ({
  id: 'sb-1',
  workspaceId: 'w1',
  machineId: 'm1',
  state: 'terminated',
  reason: 'deleted through the API',
  requested: resources,
  startedAt: new Date('2026-01-01T00:00:00Z'),
  endedAt: new Date('2026-01-01T00:10:00Z'),
  ...over,
});

async function sandboxes() {
  const { sut, fake } = await newTestService(SandboxesService);
  const repo = fake(SandboxesRepository);
  repo.markRunning.mockImplementation(async (id) => row({ id }));
  repo.findOfWorkspace.mockImplementation(async (workspaceId, id) => (workspaceId === 'w1' ? row({ id }) : undefined));
  repo.touch.mockResolvedValue(true);
  const placer = fake(SandboxPlacer);
  placer.reserve.mockResolvedValue({ placed: true, machineId: 'm1' });
  const messaging = fake(Messaging);
  messaging.request.mockResolvedValue({ running: true } as never);
  messaging.publish.mockResolvedValue({ seq: 1 } as never);
  const pins = fake(ImagePins);
  pins.pin.mockImplementation(async (ref) => ref);
  pins.isPrivate.mockReturnValue(false);
  return { sut, repo, placer, messaging, pins, volumes: fake(VolumesRepository) };
}

const spec = (over: Partial<SandboxSpec> = {}) => over as SandboxSpec;

describe('SandboxesService.create', () => {
  it('places it, has its machine start it, marks it running and tells metering; the answer is the running sandbox', async () => {
    const { sut, placer, messaging, repo } = await sandboxes();
    const view = await sut.create(principal, spec({ cpu: 2, memory: '1Gi', env: { A: '1' } }), 5_000);
    expect(view.state).toBe('running');
    const [sandbox, request] = placer.reserve.mock.calls[0];
    expect(sandbox).toMatchObject({
      workspaceId: 'w1',
      pool: 'default',
      requested: { cpuMillicores: 2000, memoryBytes: 2 ** 30, gpuCount: 0 },
    });
    expect(request).toMatchObject({ pool: 'default', cpuMillicores: 2000, verified: false });
    expect(messaging.request).toHaveBeenCalledWith(
      AGENT_SANDBOX_CREATE,
      expect.objectContaining({ sandboxId: sandbox.id, workspaceId: 'w1', image: 'host', env: { A: '1' }, workdir: '/workspace' }),
      { tokens: ['m1'], timeoutMs: 60_000 },
    );
    expect(repo.markRunning).toHaveBeenCalledWith(sandbox.id);
    expect(messaging.publish).toHaveBeenCalledWith(SANDBOX_STARTED, expect.objectContaining({ sandboxId: sandbox.id, machineId: 'm1' }), {
      msgId: `${sandbox.id}:started`,
    });
  });

  it("answers 503 when no machine can take it, without naming a shared pool's machines", async () => {
    const { sut, placer, messaging } = await sandboxes();
    placer.reserve.mockResolvedValue({ placed: false, reason: 'no machine has 64 GiB free (m7: 8 GiB, m9: 2 GiB)' });
    await expect(sut.create(principal, spec({ memory: '64Gi' }), 1_000)).rejects.toMatchObject({
      status: 503,
      message: 'no machine in pool "default" can take the sandbox now: no machine has 64 GiB free',
    });
    expect(messaging.request).not.toHaveBeenCalled();
  });

  it('ends the row as failed, says so to metering and answers 503 when its machine cannot start it', async () => {
    const { sut, repo, messaging } = await sandboxes();
    messaging.request.mockResolvedValueOnce({ running: false, reason: 'no runtime' } as never);
    repo.end.mockImplementation(async (id, state, reason) => ending({ id, state, reason, startedAt: null }));
    await expect(sut.create(principal, spec(), 5_000)).rejects.toMatchObject({
      status: 503,
      message: 'machine m1 could not start it: no runtime',
    });
    expect(repo.end).toHaveBeenCalledWith(expect.stringMatching(/^sb-/), 'failed', 'machine m1 could not start it: no runtime');
    expect(repo.markRunning).not.toHaveBeenCalled();
    expect(messaging.publish).toHaveBeenCalledWith(SANDBOX_ENDED, expect.objectContaining({ state: 'failed' }), expect.anything());
  });

  it('treats an agent that did not answer in time as a failed start', async () => {
    const { sut, repo, messaging } = await sandboxes();
    messaging.request.mockRejectedValueOnce(new RequestError(408, 'no answer within 60 s', AGENT_SANDBOX_CREATE.subject));
    repo.end.mockResolvedValue(undefined);
    await expect(sut.create(principal, spec(), 5_000)).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/^machine m1 did not start it: /),
    });
    expect(repo.end).toHaveBeenCalledWith(expect.any(String), 'failed', expect.stringMatching(/did not start it/));
  });

  it("asks for verified machines when it mounts one of the workspace's volumes", async () => {
    const { sut, placer, volumes } = await sandboxes();
    volumes.find.mockResolvedValue({ name: 'data' } as never);
    await sut.create(principal, spec({ volumes: [{ name: 'data', path: '/data' }] }), 5_000);
    expect(placer.reserve.mock.calls[0][1]).toMatchObject({ verified: true });
  });

  it.each([
    [{ volumes: [{ name: 'data', path: '/workspace' }] }, /volumes\[0\]\.path is the sandbox's own \/workspace/],
    [{ volumes: [{ name: 'nope', path: '/data' }] }, /volumes\[0\]\.name: volume nope not found in this workspace/],
    [{ gpu: 'A100', gpu_count: 0 }, /gpu_count must be at least 1/],
    [{ network: { block: ['1.1.1.1'], allow: ['8.8.8.8'] } }, /block or allow, not both/],
    [{ memory: 'lots' }, /memory/],
  ])('refuses %j with a 400 saying what to fix, placing nothing', async (over, why) => {
    const { sut, placer, volumes } = await sandboxes();
    volumes.find.mockImplementation(async (_w, name) => (name === 'data' ? ({ name } as never) : undefined));
    await expect(sut.create(principal, spec(over as Partial<SandboxSpec>), 1_000)).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(why),
    });
    expect(placer.reserve).not.toHaveBeenCalled();
  });
});

describe('SandboxesService: calls and endings', () => {
  it("answers 404 for another workspace's sandbox, as for one that does not exist", async () => {
    const { sut } = await sandboxes();
    await expect(sut.get({ ...principal, workspaceId: 'w2' }, 'sb-1')).rejects.toMatchObject({
      status: 404,
      message: 'sandbox sb-1 not found',
    });
  });

  it('answers 409 for a call to a sandbox that ended, with why, and does not keep it alive', async () => {
    const { sut, repo } = await sandboxes();
    repo.findOfWorkspace.mockResolvedValue(row({ state: 'terminated', stateReason: 'its 600 s timeout passed' }));
    await expect(sut.running(principal, 'sb-1')).rejects.toMatchObject({
      status: 409,
      message: 'sandbox sb-1 is terminated (its 600 s timeout passed): create a new one',
    });
    expect(repo.touch).not.toHaveBeenCalled();
  });

  it('meters a sandbox that ran up to its end and removes it from its machine', async () => {
    const { sut, messaging } = await sandboxes();
    await sut.ended(ending());
    expect(messaging.publish).toHaveBeenCalledWith(SANDBOX_ENDED, expect.objectContaining({ sandboxId: 'sb-1', state: 'terminated' }), {
      msgId: 'sb-1:ended',
    });
    expect(messaging.request).toHaveBeenCalledWith(
      AGENT_SANDBOX_REMOVE,
      { sandboxId: 'sb-1', reason: 'deleted through the API' },
      expect.anything(),
    );
  });

  it('meters nothing for a sandbox that ended before it ran, but still has its machine remove it', async () => {
    const { sut, messaging } = await sandboxes();
    await sut.ended(ending({ startedAt: null }));
    expect(messaging.publish).not.toHaveBeenCalled();
    expect(messaging.request).toHaveBeenCalledWith(AGENT_SANDBOX_REMOVE, expect.anything(), expect.anything());
  });

  it('answers 404 for a public port token of the wrong shape without looking it up', async () => {
    const { sut, repo } = await sandboxes();
    await expect(sut.publicPort('short')).rejects.toMatchObject({ status: 404 });
    expect(repo.findByPublicToken).not.toHaveBeenCalled();
  });
});
