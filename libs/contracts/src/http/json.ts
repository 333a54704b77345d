/** A body as a client reads it: what JSON.stringify makes of T (a Date becomes its ISO string). */
export type Json<T> = T extends Date
  ? string
  : T extends readonly (infer U)[]
    ? Json<U>[]
    : T extends object
      ? { [K in keyof T]: Json<T[K]> }
      : T;

/** true when A and B accept the same values and have the same keys, else false. */
export type SameType<A, B> = [A] extends [B]
  ? [B] extends [A]
    ? [keyof A] extends [keyof B]
      ? [keyof B] extends [keyof A]
        ? true
        : false
      : false
    : false
  : false;

/**
 * Compiles only for `true`: `type X = Conforms<SameType<Json<GatewayType>, ContractType>>` in
 * the gateway fails type-checking the moment its answer and the contract part.
 */
export type Conforms<T extends true> = T;
