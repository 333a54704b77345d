import { cpuMs, type Stack } from './stack.js';

/** CPU each service of the stack (with its child processes) spent during one phase of a bench, in ms. */
export type ServiceCpu = Record<string, number>;

/**
 * Runs `work` and measures the CPU each service of an own stack spent meanwhile: the figure that
 * survives a loaded machine (wall-clock time counts the waits for a core, CPU time does not).
 * Against a given stack (`--gateway`) its processes are not known: no figures.
 */
export async function duringWork<T>(stack: Stack, own: boolean, work: () => Promise<T>): Promise<{ value: T; cpu: ServiceCpu }> {
  const pids = own ? await stack.pids() : {};
  const before = await Promise.all(Object.values(pids).map((pid) => cpuMs([pid])));
  const value = await work();
  const after = await Promise.all(Object.values(pids).map((pid) => cpuMs([pid])));
  const cpu: ServiceCpu = {};
  Object.keys(pids).forEach((service, i) => (cpu[service] = after[i] - before[i]));
  return { value, cpu };
}

/**
 * Prints a table of CPU per service, one pair of columns per phase (seconds in all, ms per `unit`),
 * with the sum of all services last. Nothing when no phase has figures.
 */
export function printServiceCpu(title: string, unit: string, phases: { label?: string; count: number; cpu: ServiceCpu }[]): void {
  const shown = phases.filter((p) => Object.keys(p.cpu).length);
  if (!shown.length) return;
  const services = [...new Set(shown.flatMap((p) => Object.keys(p.cpu)))];
  const total = (cpu: ServiceCpu) => Object.values(cpu).reduce((a, b) => a + b, 0);
  console.log(`\n${title}`);
  if (shown.some((p) => p.label)) console.log(`${''.padEnd(18)}${shown.map((p) => ` ${(p.label ?? '').padStart(16)}`).join('')}`);
  console.log(`${'service'.padEnd(18)}${shown.map(() => ` ${'CPU s'.padStart(6)}  ${`ms/${unit}`.padStart(8)}`).join('')}`);
  for (const service of [...services, 'all']) {
    const cells = shown.map((p) => {
      const ms = service === 'all' ? total(p.cpu) : (p.cpu[service] ?? 0);
      return ` ${(ms / 1000).toFixed(2).padStart(6)}  ${(ms / p.count).toFixed(2).padStart(8)}`;
    });
    console.log(`${service.padEnd(18)}${cells.join('')}`);
  }
}
