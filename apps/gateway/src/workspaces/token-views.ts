import type { Conforms, CreatedToken, Json, SameType, TokenView as TokenViewContract } from '#tern/contracts';
import type { TokenView, WorkspacesService } from './workspaces.service.js';

/** The tokens API's answers, held to their contracts: fails type-checking when they part. */
export type TokenAnswersConform = [
  Conforms<SameType<Json<TokenView>, TokenViewContract>>,
  Conforms<SameType<Json<Awaited<ReturnType<WorkspacesService['createToken']>>>, CreatedToken>>,
];
