/** A span of time (epoch ms, from inclusive, to exclusive) in which this process heard nothing of a subject. */
export type Span = readonly [from: number, to: number];

/** Deaf spans kept, the oldest dropped past it: bounded memory; only a gap reaching back past them loses their forgiveness. */
const SPANS_KEPT = 64;

/**
 * When a process could hear a core NATS subject, so that its handlers can tell a silence of the
 * senders from one of its own: a core message sent while the process was not subscribed (not yet
 * started, or disconnected from NATS) is lost, not late. `deafSpans` are the times it was
 * subscribed and could not hear, each closed when it could again; before `since` it heard nothing.
 */
export class Hearing {
  private liveSince?: number;
  private deafFrom?: number;
  private readonly spans: Span[] = [];

  /** When the subscription was first known to the server (epoch ms); undefined before. */
  get since(): number | undefined {
    return this.liveSince;
  }

  /** Whether the subscription is live now (subscribed and connected). */
  get live(): boolean {
    return this.liveSince !== undefined && this.deafFrom === undefined;
  }

  /** The closed spans since `since` in which nothing could be heard, oldest first. */
  get deafSpans(): readonly Span[] {
    return this.spans;
  }

  /** Since when the process has heard without a break (`since`, or the end of its last deaf span); undefined while deaf. */
  get unbrokenSince(): number | undefined {
    if (!this.live) return undefined;
    return this.spans.at(-1)?.[1] ?? this.liveSince;
  }

  began(at: number) {
    this.liveSince ??= at;
  }

  lost(at: number) {
    if (this.liveSince !== undefined) this.deafFrom ??= at;
  }

  regained(at: number) {
    if (this.deafFrom === undefined) return;
    this.spans.push([this.deafFrom, at]);
    if (this.spans.length > SPANS_KEPT) this.spans.shift();
    this.deafFrom = undefined;
  }
}
