// A Tern endpoint for the Node runner: it imports this module from /app, awaits load() once per
// container, then calls predict(input) with each POST's JSON body and answers its return value.
import { hostname } from 'node:os';

let loadedAt;

export async function load() {
  loadedAt = Date.now();
}

export async function predict(input) {
  return {
    hello: input?.name ?? 'world',
    runtime: `node ${process.version}`,
    container: hostname(),
    warmForMs: Date.now() - loadedAt,
  };
}
