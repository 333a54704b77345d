const EXIT_CODES = { SIGINT: 130, SIGTERM: 143 } as const;

/**
 * `stop`, run once however the bench ends: by its own `finally` (call the function returned), or
 * by Ctrl-C or SIGTERM, which would end the process before any `finally` ran and leave behind
 * what the bench made (its stack, or the deployments it made on a given one, holding cores the
 * next bench needs). On a signal the cleanup runs and the process exits 130 (SIGINT) or 143
 * (SIGTERM); a second signal while it runs exits at once. The handler stays registered until
 * then: execa's signal-exit re-raises a signal that no other listener handles, which would end
 * the process under the cleanup.
 */
export function stopOnInterrupt(
  stop: () => Promise<void>,
  log: (msg: string) => void,
  exit: (code: number) => void = (code) => process.exit(code),
): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  let interrupted = false;
  const once = () => (stopping ??= stop());
  const onSignal = (signal: keyof typeof EXIT_CODES) => {
    if (interrupted) {
      log(`${signal} again: exiting without finishing the cleanup`);
      return exit(EXIT_CODES[signal]);
    }
    interrupted = true;
    log(`${signal}: cleaning up before exiting (again to exit at once)`);
    void once()
      .catch((e: unknown) => log(`cleanup failed: ${(e as Error).message}`))
      .finally(() => {
        forget();
        exit(EXIT_CODES[signal]);
      });
  };
  const forget = () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return () => {
    if (!interrupted) forget();
    return once();
  };
}
