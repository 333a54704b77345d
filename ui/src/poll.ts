import { useCallback, useEffect, useRef, useState } from 'react';

/** Every page refreshes this often while it is open (live updates without reloading). */
export const POLL_MS = 5000;

export interface Polled<T> {
  data?: T;
  error?: Error;
  /** When the last answer arrived; the browser test waits for it to know a page has its data. */
  loadedAt?: number;
  reload: () => void;
}

/** Loads `load()` now and every POLL_MS while mounted; `deps` restart it (a new filter, say). */
export function usePoll<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Polled<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loadedAt?: number }>({});
  const [tick, setTick] = useState(0);
  const loader = useRef(load);
  loader.current = load;
  useEffect(() => {
    const aborter = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = () => {
      loader.current(aborter.signal).then(
        (data) => setState({ data, loadedAt: Date.now() }),
        (error: unknown) => {
          if (!aborter.signal.aborted) setState((s) => ({ ...s, error: error instanceof Error ? error : new Error(String(error)) }));
        },
      );
      timer = setTimeout(run, POLL_MS);
    };
    run();
    return () => {
      aborter.abort();
      clearTimeout(timer);
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}
