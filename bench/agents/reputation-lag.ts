/** bench/agents: the reputation side of the heartbeat lag it measures. */

/**
 * Heartbeat lag at reputation for the sample: from the beat's sentAt (its worker's report) to
 * when the stored lastSequence reached it (read every 100 ms). Whichever of the two is known
 * second gives the lag, so the workers' once-a-second reports do not add to it.
 */
export class ReputationLag {
  readonly lags: number[] = [];
  private readonly sent = new Map<string, Map<number, number>>();
  private readonly stored = new Map<string, { sequence: number; at: number }[]>();
  constructor(private readonly measuring: (sentAt: number) => boolean) {}

  beat(id: string, sequence: number, sentAt: number) {
    const seen = this.stored.get(id)?.find((s) => s.sequence >= sequence);
    if (seen) return this.add(sentAt, seen.at);
    if (!this.sent.has(id)) this.sent.set(id, new Map());
    this.sent.get(id)!.set(sequence, sentAt);
  }

  storedSequence(id: string, sequence: number, at: number) {
    const list = this.stored.get(id) ?? [];
    if (list.at(-1)?.sequence === sequence) return;
    list.push({ sequence, at });
    this.stored.set(id, list.slice(-4));
    const pending = this.sent.get(id);
    for (const [seq, sentAt] of pending ?? [])
      if (seq <= sequence) {
        this.add(sentAt, at);
        pending!.delete(seq);
      }
  }

  private add(sentAt: number, at: number) {
    if (this.measuring(sentAt)) this.lags.push(Math.max(0, at - sentAt));
  }
}
