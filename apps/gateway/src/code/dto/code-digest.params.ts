import { Matches } from 'class-validator';

/** `sha256:<hex>`: the same form as a spec's `code`, so the CLI passes it through unchanged. */
export class CodeDigestParams {
  @Matches(/^sha256:[a-f0-9]{64}$/, { message: 'digest must be sha256:<64 lower-case hex digits>' })
  digest!: string;
}
