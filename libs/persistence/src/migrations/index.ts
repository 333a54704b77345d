import { Initial1763780000000 } from './1763780000000-initial.js';

/** In order of their timestamps. Listed by hand for the same reason as ENTITIES. */
export const MIGRATIONS = [Initial1763780000000] as const;
