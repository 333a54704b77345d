import type { Conforms, Json, PoolView as PoolViewContract, SameType } from '#tern/contracts';
import type { PoolView } from './pools.service.js';

/** The pools API's answer, held to its contract (shared with the CLI): fails type-checking when they part. */
export type PoolViewConforms = Conforms<SameType<Json<PoolView>, PoolViewContract>>;
