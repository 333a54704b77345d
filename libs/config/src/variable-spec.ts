/** What a variable of variables.ts says about itself, and the services that read it. */
export type ServiceName = 'gateway' | 'scheduler' | 'autoscaler' | 'metering' | 'reputation' | 'agent';

export const SERVICE_NAMES: readonly ServiceName[] = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation', 'agent'];

/** `file`: a path that must name a readable file when set (certificates, keys). */
export type VariableKind = 'string' | 'url' | 'int' | 'bool' | 'enum' | 'file';

export interface VariableSpec {
  readonly name: string;
  readonly kind: VariableKind;
  /** Default as the string a user would write; undefined means "not set". */
  readonly default?: string;
  /** Per-service defaults, where one default does not fit all. */
  readonly serviceDefaults?: Partial<Record<ServiceName, string>>;
  readonly values?: readonly string[];
  readonly min?: number;
  readonly max?: number;
  readonly services: readonly ServiceName[] | 'all';
  readonly description: string;
}

export const CONTROL_PLANE: readonly ServiceName[] = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'];
export const WITH_DATABASE: readonly ServiceName[] = ['gateway', 'scheduler', 'metering', 'reputation'];
