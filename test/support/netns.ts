import { execa } from 'execa';

/**
 * A network namespace of a test joined to the root namespace by a veth pair in a /30: the root
 * side holds `near` (the first address), the namespace `far` (the second). With `defaultRoute`
 * everything the namespace sends goes to the root namespace; without it the namespace reaches
 * the /30 only. Needs root and `ip` (iproute2). Undone by removeLinkedNamespace.
 */
export async function addLinkedNamespace(o: {
  namespace: string;
  hostVeth: string;
  peerVeth: string;
  near: string;
  far: string;
  defaultRoute: boolean;
}): Promise<void> {
  const ip = (...args: string[]) => execa('ip', args);
  const inside = (...args: string[]) => ip('netns', 'exec', o.namespace, 'ip', ...args);
  await ip('netns', 'add', o.namespace);
  await ip('link', 'add', o.hostVeth, 'type', 'veth', 'peer', 'name', o.peerVeth);
  await ip('link', 'set', o.peerVeth, 'netns', o.namespace);
  await ip('addr', 'add', `${o.near}/30`, 'dev', o.hostVeth);
  await ip('link', 'set', o.hostVeth, 'up');
  await inside('addr', 'add', `${o.far}/30`, 'dev', o.peerVeth);
  await inside('link', 'set', o.peerVeth, 'up');
  await inside('link', 'set', 'lo', 'up');
  if (o.defaultRoute) await inside('route', 'add', 'default', 'via', o.near);
}

/** Deletes the namespace (its end of the veth pair goes with it) and the root end, if still there. */
export async function removeLinkedNamespace(namespace: string, hostVeth: string): Promise<void> {
  await execa('ip', ['netns', 'del', namespace], { reject: false });
  await execa('ip', ['link', 'del', hostVeth], { reject: false });
}
