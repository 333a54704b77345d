import { IsIn, IsObject, IsOptional, IsString, Matches } from 'class-validator';
import { Cron } from 'croner';

export const CATCH_UP_POLICIES = ['none', 'latest'] as const;
export type CatchUpPolicy = (typeof CATCH_UP_POLICIES)[number];

/** `schedule:` of a function or task queue: a cron expression (seconds allowed) in a timezone, or a fixed period. */
export class SpecSchedule {
  /** Five fields, or six with seconds first: "*\/5 * * * *", "*\/1 * * * * *". */
  @IsOptional() @IsString() cron?: string;
  /** An IANA timezone the cron expression is read in; default UTC. */
  @IsOptional() @IsString() timezone?: string;
  /** A period instead of cron: "30s", "5m", "2h". */
  @IsOptional() @Matches(/^\d+(s|m|h)$/, { message: 'schedule.every must be a period like 30s, 5m or 2h' }) every?: string;
  /** The input each run gets (a JSON object); default {}. */
  @IsOptional() @IsObject() input?: Record<string, unknown>;
  /** After downtime: none (default) skips the missed ticks, latest runs once for them. */
  @IsOptional() @IsIn(CATCH_UP_POLICIES, { message: 'schedule.catch_up must be none or latest' }) catch_up?: CatchUpPolicy;
}

/** A schedule with its defaults, checked: what the scheduler fires. */
export interface ResolvedSchedule {
  readonly cron?: string;
  readonly everySeconds?: number;
  readonly timezone: string;
  readonly input: Record<string, unknown>;
  readonly catchUp: CatchUpPolicy;
}

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600 };

/** Checks a schedule; the message of the Error names the field and what to fix. */
export function resolveSchedule(s: SpecSchedule): ResolvedSchedule {
  if (!!s.cron === !!s.every) throw new Error('schedule needs exactly one of cron (e.g. "*/5 * * * *") or every (e.g. 30s)');
  const timezone = s.timezone ?? 'UTC';
  try {
    new Intl.DateTimeFormat('en', { timeZone: timezone });
  } catch {
    throw new Error(`schedule.timezone "${timezone}" is not an IANA timezone (e.g. Europe/Paris, America/New_York, UTC)`);
  }
  if (s.every && s.timezone) throw new Error('schedule.timezone applies to cron only (every is a fixed period)');
  const base = { timezone, input: s.input ?? {}, catchUp: s.catch_up ?? 'none' } as const;
  if (s.every) {
    const m = /^(\d+)(s|m|h)$/.exec(s.every)!;
    const everySeconds = Number(m[1]) * UNIT_SECONDS[m[2]];
    if (everySeconds < 1) throw new Error('schedule.every must be at least 1s');
    return { ...base, everySeconds };
  }
  try {
    new Cron(s.cron!, { timezone, paused: true });
  } catch (e) {
    throw new Error(
      `schedule.cron "${s.cron}" is not a cron expression (${(e as Error).message}): five fields "min hour day month weekday", or six with seconds first`,
      { cause: e },
    );
  }
  return { ...base, cron: s.cron };
}

/** How a schedule reads in a list: its expression or period. */
export function scheduleExpression(s: ResolvedSchedule): string {
  return s.cron ?? `every ${s.everySeconds}s`;
}

/**
 * The schedule's ticks in (after, until], oldest first, at most `limit`. Periods are aligned to
 * the epoch, so every replica computes the same tick times without talking to the others.
 */
export function ticksBetween(s: ResolvedSchedule, after: Date, until: Date, limit = 1000): Date[] {
  const ticks: Date[] = [];
  if (s.everySeconds) {
    const period = s.everySeconds * 1000;
    for (let t = Math.floor(after.getTime() / period) * period + period; t <= until.getTime() && ticks.length < limit; t += period)
      ticks.push(new Date(t));
    return ticks;
  }
  const cron = new Cron(s.cron!, { timezone: s.timezone, paused: true });
  for (let t = cron.nextRun(after); t && t <= until && ticks.length < limit; t = cron.nextRun(t)) ticks.push(t);
  return ticks;
}

/** The first tick after `after`. */
export function nextTick(s: ResolvedSchedule, after: Date): Date | null {
  if (s.everySeconds) {
    const period = s.everySeconds * 1000;
    return new Date(Math.floor(after.getTime() / period) * period + period);
  }
  return new Cron(s.cron!, { timezone: s.timezone, paused: true }).nextRun(after);
}
