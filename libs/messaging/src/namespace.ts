import { SUBJECT_ROOT, type StreamName } from '#tern/contracts';

/**
 * Rewrites names from the contracts (`tern.x.y.v1`, stream `EVENTS`, bucket `routes`) into
 * one installation's namespace, so several installations or test runs share one NATS server.
 */
export class Namespace {
  constructor(readonly name: string) {
    if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`invalid NATS namespace ${JSON.stringify(name)}`);
  }

  subject(subject: string): string {
    if (subject === SUBJECT_ROOT || subject.startsWith(`${SUBJECT_ROOT}.`)) return this.name + subject.slice(SUBJECT_ROOT.length);
    return subject;
  }

  /** The contract-form subject (root `tern`) of a subject seen on the wire. */
  canonical(subject: string): string {
    if (subject.startsWith(`${this.name}.`)) return SUBJECT_ROOT + subject.slice(this.name.length);
    return subject;
  }

  stream(name: StreamName): string {
    return `${this.name}_${name}`;
  }

  bucket(name: string): string {
    return `${this.name}_${name}`;
  }

  service(name: string): string {
    return `${this.name}-${name}`;
  }

  /** A durable consumer name derived from its owner and subject: `scheduler_heartbeat_any_v1`. */
  durable(owner: string, subject: string): string {
    const body = subject
      .split('.')
      .slice(1)
      .map((t) => (t === '*' ? 'any' : t === '>' ? 'all' : t))
      .join('_');
    return `${owner}_${body}`.replace(/[^A-Za-z0-9_-]/g, '_');
  }
}
