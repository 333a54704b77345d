import { Matches, type MetadataStorage, ValidateBy, ValidationTypes, buildMessage, getMetadataStorage } from 'class-validator';

/**
 * Decorators shared by the payload classes. Each registers ordinary class-validator metadata
 * under its own name, so validation runs it and `renderNatsDoc` can describe it.
 */

/** Ids that travel as subject tokens (machine, deployment, container, task, workspace): the same rule `subjectFor` enforces. */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export function IsId(): PropertyDecorator {
  return Matches(ID_PATTERN, { message: '$property must be 1-64 letters, digits, - or _' });
}

export const IS_NULLABLE = 'isNullable';

/**
 * The property must be present and may be `null`; the other validators run on any other
 * value. (IsOptional would also let the property be missing, which hides a sender's bug.)
 */
export function IsNullable(): PropertyDecorator {
  return (target, propertyKey) => {
    const propertyName = String(propertyKey);
    const metadata: Parameters<MetadataStorage['addValidationMetadata']>[0] = {
      type: ValidationTypes.CONDITIONAL_VALIDATION,
      name: IS_NULLABLE,
      target: target.constructor,
      propertyName,
      constraintCls: Object,
      constraints: [(object: Record<string, unknown>) => object[propertyName] !== null],
      message: '',
      groups: [],
      each: false,
      validationTypeOptions: undefined,
    };
    getMetadataStorage().addValidationMetadata(metadata);
  };
}

export const IS_RECORD_OF_STRINGS = 'isRecordOfStrings';
export const IS_RECORD_OF_NUMBERS = 'isRecordOfNumbers';

/** A plain JSON object whose values are all strings (env) or all finite numbers (score components). */
export function IsRecordOf(valueType: 'string' | 'number'): PropertyDecorator {
  return ValidateBy({
    name: valueType === 'string' ? IS_RECORD_OF_STRINGS : IS_RECORD_OF_NUMBERS,
    validator: {
      validate: (value: unknown) =>
        typeof value === 'object' &&
        value !== null &&
        !Array.isArray(value) &&
        Object.values(value).every((v) => (valueType === 'string' ? typeof v === 'string' : Number.isFinite(v))),
      defaultMessage: buildMessage((each) => `${each}$property must be an object whose values are all ${valueType}s`),
    },
  });
}
