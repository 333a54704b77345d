import type { Conforms, Json, RewardsReport as RewardsContract, SameType, UsageReport as UsageContract } from '#tern/contracts';
import type { RewardsReport, UsageReport } from './usage.service.js';

/** The usage API's answers, held to their contracts (shared with the CLI): fails type-checking when they part. */
export type UsageAnswersConform = [
  Conforms<SameType<Json<UsageReport>, UsageContract>>,
  Conforms<SameType<Json<RewardsReport>, RewardsContract>>,
];
