import { BadRequestException } from '@nestjs/common';
import { type UsageWindowQuery } from './dto/usage.query.js';

const DAY_MS = 86_400_000;
/** A year and a day: enough for any billing period, small enough to answer quickly. */
export const MAX_WINDOW_DAYS = 366;

export interface UsageWindow {
  from: Date;
  to: Date;
}

/** The query's window with its defaults (the last 24 h), or 400 naming the parameter at fault. */
export function usageWindow(query: UsageWindowQuery, now = new Date()): UsageWindow {
  const to = query.to ? new Date(query.to) : now;
  const from = query.from ? new Date(query.from) : new Date(to.getTime() - DAY_MS);
  if (Number.isNaN(to.getTime())) throw new BadRequestException(`to: ${query.to} is not a date`);
  if (Number.isNaN(from.getTime())) throw new BadRequestException(`from: ${query.from} is not a date`);
  if (from >= to) throw new BadRequestException(`from (${from.toISOString()}) must be before to (${to.toISOString()})`);
  if (to.getTime() - from.getTime() > MAX_WINDOW_DAYS * DAY_MS) {
    throw new BadRequestException(`from and to must be at most ${MAX_WINDOW_DAYS} days apart`);
  }
  return { from, to };
}
