import { Injectable } from '@nestjs/common';

/**
 * Which of this machine's GPUs are held (`vendor:index`), by containers and by sandboxes alike:
 * each registers what it holds, and both allocate against the whole, so neither hands a GPU the
 * other holds. Allocation and the holding it records happen without an await in between.
 */
@Injectable()
export class GpuHolders {
  private readonly holders: (() => Iterable<string>)[] = [];

  add(held: () => Iterable<string>): void {
    this.holders.push(held);
  }

  busy(): Set<string> {
    return new Set(this.holders.flatMap((held) => [...held()]));
  }
}
