import { execa } from 'execa';

/**
 * Tests that need a real part of the machine (root, runc, umoci, python3, nats-server, ip, nft,
 * openssl, chromium, prometheus). On a developer's machine a missing part skips the suite with a
 * warning; under CI=true it fails the run with the reason and the fix, because a suite that
 * passes by skipping proves nothing.
 */
export type RealPart =
  | 'root'
  | 'runc'
  | 'umoci'
  | 'python3'
  | 'nats-server'
  | 'ip'
  | 'nft'
  | 'openssl'
  | 'chromium'
  | 'prometheus'
  | 'skopeo'
  | 'docker-registry'
  | 'debootstrap'
  | 'zstd';

/** Why each part is needed and how to get it, for the message. */
const INSTALL: Record<Exclude<RealPart, 'root'>, string> = {
  runc: 'apt-get install runc',
  umoci: 'apt-get install umoci',
  python3: 'apt-get install python3',
  'nats-server': 'apt-get install nats-server',
  ip: 'apt-get install iproute2',
  nft: 'apt-get install nftables',
  openssl: 'apt-get install openssl',
  chromium: 'apt-get install chromium',
  prometheus: 'apt-get install prometheus',
  skopeo: 'apt-get install skopeo',
  'docker-registry': 'apt-get install docker-registry apache2-utils',
  debootstrap: 'apt-get install debootstrap',
  zstd: 'apt-get install zstd',
};

/** How a part tells its version (`ip` and `openssl` have no --version). */
const VERSION_FLAG: Partial<Record<RealPart, string>> = { ip: '-V', openssl: 'version' };

export function inCi(env: NodeJS.ProcessEnv = process.env): boolean {
  return /^(true|1)$/i.test(env.CI ?? '');
}

/** undefined when the part is there, else what is wrong and how to fix it. */
export async function missingPart(part: RealPart): Promise<string | undefined> {
  if (part === 'root') {
    return process.getuid?.() === 0 ? undefined : 'the tests do not run as root (rootful runc needs cgroups and mounts); run them as root';
  }
  const r = await execa(part, [VERSION_FLAG[part] ?? '--version'], { reject: false });
  if (r.exitCode === 0) return undefined;
  const notFound = (r as { code?: string }).code === 'ENOENT';
  return notFound
    ? `${part} is not on PATH; install it (${INSTALL[part]})`
    : `\`${part} --version\` failed (${(r.stderr || r.shortMessage || '').toString().split('\n')[0]}); reinstall it (${INSTALL[part]})`;
}

type Describe = (title: string, fn: () => void) => void;

/**
 * `describe` when every part is there. Otherwise: under CI=true a suite whose one test fails
 * with the reasons; elsewhere `describe.skip`, with a warning naming what is missing.
 */
export async function describeNeeding(parts: RealPart[], env: NodeJS.ProcessEnv = process.env): Promise<Describe> {
  const reasons = (await Promise.all(parts.map(missingPart))).filter((r): r is string => r !== undefined);
  if (!reasons.length) return describe;
  if (inCi(env)) {
    return (title, _fn) =>
      describe(title, () => {
        it(`needs ${parts.join(', ')}`, () => {
          throw new Error(`CI=true: ${reasons.join('; ')} — tests that need ${parts.join(', ')} cannot be skipped in CI`);
        });
      });
  }
  return (title, fn) => {
    console.warn(`"${title}" skipped: ${reasons.join('; ')} (under CI=true this fails the run)`);
    describe.skip(title, fn);
  };
}
