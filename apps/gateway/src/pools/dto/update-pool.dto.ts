import { PoolRulesDto } from './pool-rules.js';

/** Only the fields given change; null removes a rule. */
export class UpdatePoolDto extends PoolRulesDto {}
