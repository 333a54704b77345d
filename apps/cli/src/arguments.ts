import { InvalidArgumentError } from 'commander';

/** Option parsers shared by commands: each throws commander's InvalidArgumentError with what to type instead. */

export function jsonArgument(value: string): string {
  try {
    JSON.parse(value);
  } catch (e) {
    throw new InvalidArgumentError(`must be JSON (${(e as Error).message})`);
  }
  return value;
}

export function secondsArgument(value: string): number {
  if (!/^\d+$/.test(value.trim())) throw new InvalidArgumentError('must be a whole number of seconds');
  return Number(value);
}

export function versionArgument(value: string): number {
  if (!/^[1-9]\d*$/.test(value.trim())) throw new InvalidArgumentError('must be a version number, e.g. 2');
  return Number(value);
}

export function countArgument(value: string): number {
  if (!/^\d+$/.test(value.trim())) throw new InvalidArgumentError('must be a whole number, e.g. 3');
  return Number(value);
}
