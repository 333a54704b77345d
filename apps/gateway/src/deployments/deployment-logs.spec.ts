import { type ContainerLogLine } from '#tern/contracts';
import { lineProblem } from './deployment-logs.service.js';

const line = (over: Partial<ContainerLogLine> = {}): ContainerLogLine => ({
  containerId: 'c-1',
  deploymentId: 'd-1',
  stream: 'stdout',
  line: 'hello',
  sequence: 0,
  at: '2026-11-24T00:00:00.000Z',
  ...over,
});
const placements = new Map<string, string | null>([
  ['c-1', 'm-1'],
  ['c-2', null],
]);
const subject = (over: Partial<{ machineId: string; deploymentId: string; containerId: string }> = {}) => ({
  machineId: 'm-1',
  deploymentId: 'd-1',
  containerId: 'c-1',
  ...over,
});

describe('which log lines a follow relays', () => {
  it("relays a line of the deployment's container from the machine it is placed on", () => {
    expect(lineProblem(subject(), line(), placements)).toBeUndefined();
  });

  it('drops a line from another machine, of an unknown or unplaced container, or whose payload contradicts its subject', () => {
    expect(lineProblem(subject({ machineId: 'm-2' }), line(), placements)).toBe('container c-1 is not placed on machine m-2');
    expect(lineProblem(subject({ containerId: 'c-9' }), line({ containerId: 'c-9' }), placements)).toBe(
      "container c-9 is not one of the deployment's",
    );
    expect(lineProblem(subject({ containerId: 'c-2' }), line({ containerId: 'c-2' }), placements)).toBe(
      'container c-2 is not placed on machine m-1',
    );
    expect(lineProblem(subject(), line({ deploymentId: 'd-2' }), placements)).toMatch(/^its payload names container c-1 of deployment d-2/);
    expect(lineProblem(subject(), line({ containerId: 'c-2' }), placements)).toMatch(/^its payload names container c-2/);
  });
});
