import type { DeploymentDetail, VersionView } from '#tern/contracts';
import { renderDeployment } from './deployments.js';

const version: VersionView = {
  version: 2,
  latest: true,
  desired: 1,
  actual: 0,
  desiredReason: null,
  placementReason: null,
  crashLoop: null,
  createdAt: new Date().toISOString(),
};

const detail = (versions: VersionView[]): DeploymentDetail =>
  ({
    name: 'llm',
    kind: 'endpoint',
    version: 2,
    state: 'ready',
    desired: 1,
    actual: 0,
    reason: null,
    url: 'http://gw/endpoint/llm',
    updatedAt: new Date().toISOString(),
    deploymentId: 'd-1',
    versions,
    containers: [],
  }) as unknown as DeploymentDetail;

describe('renderDeployment', () => {
  it("shows a version's crash loop: its count, last crash with exit code, next start and last lines", () => {
    const crashLoop = {
      state: 'CrashLoopBackOff' as const,
      crashes: 4,
      lastCrashAt: new Date().toISOString(),
      nextStartAt: new Date(Date.now() + 8000).toISOString(),
      phase: 'runtime',
      error: 'exited with code 3',
      exitCode: 3,
      lastLines: ['loading', '! Traceback: no weights'],
    };
    const text = renderDeployment(detail([{ ...version, crashLoop }]));
    expect(text).toMatch(/v2 \(latest\) .* CrashLoopBackOff/);
    expect(text).toMatch(
      /v2: CrashLoopBackOff: 4 container\(s\) crashed in a row; last \d+s ago \(runtime: exited with code 3, exit code 3\); next start at /,
    );
    expect(text).toContain('  last lines:\n    loading\n    ! Traceback: no weights');
  });

  it('says nothing of crashes when there are none', () => {
    expect(renderDeployment(detail([version]))).not.toMatch(/CrashLoop|last lines/);
  });
});
