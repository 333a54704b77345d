import { existsSync, mkdirSync, readdirSync, renameSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';

/** Where nats-server keeps the streams of the anonymous global account (a server without accounts). */
export const ANONYMOUS_ACCOUNT = '$G';

/**
 * Upgrading a `.tern/` made before operator mode: its private NATS ran without accounts, so every
 * stream (the task and event streams, and each KV bucket and object store, which are streams too)
 * sits in `<store>/jetstream/$G/streams/`. In operator mode the Tern account reads only
 * `<store>/jetstream/<account public key>/streams/`, and the old ones look gone. JetStream keeps
 * nothing of the account inside a stream's directory, so while the server is stopped a stream moves
 * to the Tern account by renaming its directory (same filesystem: atomic, nothing copied).
 *
 * Moves each stream the Tern account does not have yet; a name the account has already (the
 * upgraded Tern ran before and made a fresh, empty one) is left where it is and returned in
 * `conflicts`, never overwritten. Returns { moved, conflicts, from, to }; both lists are empty
 * when there was nothing to upgrade.
 */
export function adoptAnonymousStreams(storeDir, accountPublicKey) {
  const from = join(storeDir, 'jetstream', ANONYMOUS_ACCOUNT, 'streams');
  const to = join(storeDir, 'jetstream', accountPublicKey, 'streams');
  const result = { moved: [], conflicts: [], from, to };
  if (!existsSync(from)) return result;
  for (const name of readdirSync(from).sort()) {
    if (existsSync(join(to, name))) {
      result.conflicts.push(name);
      continue;
    }
    mkdirSync(to, { recursive: true });
    renameSync(join(from, name), join(to, name));
    result.moved.push(name);
  }
  if (!result.conflicts.length) {
    // Empty now: gone, so the next start has nothing to look at.
    for (const dir of [from, join(storeDir, 'jetstream', ANONYMOUS_ACCOUNT)]) {
      try {
        rmdirSync(dir);
      } catch {
        // not empty (something other than streams): left as it is
      }
    }
  }
  return result;
}
