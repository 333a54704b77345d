/** A counter on a service's /metrics with the given labels (others ignored), 0 when it has not counted yet. */
export async function counterValue(baseUrl: string, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}
