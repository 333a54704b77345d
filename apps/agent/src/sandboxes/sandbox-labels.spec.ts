import { sandboxFromLabels, sandboxLabels } from './sandbox-labels.js';

describe('sandbox labels', () => {
  const record = { sandboxId: 'sb-1', workspaceId: 'ws-1', workdir: '/workspace', gpus: ['nvidia:0', 'nvidia:3'] };

  it('recognise a sandbox this agent started for this machine, with the GPUs it holds', () => {
    expect(sandboxFromLabels('sb-1', sandboxLabels(record, 'm-1'), 'm-1')).toEqual(record);
    expect(sandboxFromLabels('sb-1', sandboxLabels({ ...record, gpus: [] }, 'm-1'), 'm-1')).toEqual({ ...record, gpus: [] });
    // Started before sandboxes held GPUs: no label, none held.
    const { 'tern.gpus': _, ...older } = sandboxLabels(record, 'm-1');
    expect(sandboxFromLabels('sb-1', older, 'm-1')).toEqual({ ...record, gpus: [] });
  });

  it("refuse another machine's, another container's and incomplete labels", () => {
    expect(sandboxFromLabels('sb-1', sandboxLabels(record, 'm-2'), 'm-1')).toBeUndefined();
    expect(sandboxFromLabels('sb-2', sandboxLabels(record, 'm-1'), 'm-1')).toBeUndefined();
    expect(sandboxFromLabels('sb-1', { ...sandboxLabels(record, 'm-1'), 'tern.sandbox-workdir': 'relative' }, 'm-1')).toBeUndefined();
    expect(sandboxFromLabels('c-1', { 'tern.container': 'c-1', 'tern.machine': 'm-1' }, 'm-1')).toBeUndefined();
  });
});
