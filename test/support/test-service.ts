import { jest } from '@jest/globals';
import type { InjectionToken, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';

/**
 * A typed fake: every method a jest.fn() that returns undefined (an async method: a promise of
 * undefined) until the spec says otherwise.
 */
export type Fake<T extends object> = jest.Mocked<T>;

/** A fake of a class: each method of its prototype chain (its fields aside) a fresh jest.fn(). */
export function fakeOf<T extends object>(cls: Type<T>): Fake<T> {
  const fake: Record<string, unknown> = {};
  for (let proto = cls.prototype as object; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto) as object) {
    for (const key of Object.getOwnPropertyNames(proto)) {
      const descriptor = Object.getOwnPropertyDescriptor(proto, key);
      const method: unknown = descriptor?.value;
      if (key === 'constructor' || key in fake || typeof method !== 'function') continue;
      fake[key] = method.constructor.name === 'AsyncFunction' ? jest.fn().mockResolvedValue(undefined as never) : jest.fn();
    }
  }
  return fake as Fake<T>;
}

/**
 * A fake that still passes `instanceof cls` (its own jest.fn()s shadow the class's methods), for
 * code that picks a path by the class it was given, as the agent does for the runc runtime.
 */
export function fakeInstanceOf<T extends object>(cls: Type<T>): Fake<T> {
  return Object.setPrototypeOf(fakeOf(cls), cls.prototype as object) as Fake<T>;
}

export interface TestService<T> {
  /** The service under test, built by Nest's injector as in the app. */
  sut: T;
  /** The fake that stands for one of its class dependencies. */
  fake<D extends object>(cls: Type<D>): Fake<D>;
}

/**
 * Builds a Nest service for a unit spec (the seam immich's newTestService gives every service):
 * each dependency that is a class (repositories, Messaging, other services) becomes a typed fake;
 * a dependency injected by token (TERN_CONFIG, …) takes the value the spec gives in `values`, and
 * a missing one fails the build naming it. Decisions are tested here; what crosses a process
 * stays in the integration tests.
 */
export async function newTestService<T>(service: Type<T>, values: [InjectionToken, unknown][] = []): Promise<TestService<T>> {
  const fakes = new Map<unknown, unknown>();
  const moduleRef = await Test.createTestingModule({
    providers: [service, ...values.map(([provide, useValue]) => ({ provide, useValue }))],
  })
    .useMocker((token) => {
      if (typeof token !== 'function') throw new Error(`${service.name} needs ${String(token)}: give it in newTestService's values`);
      const fake = fakeOf(token as Type<object>);
      fakes.set(token, fake);
      return fake;
    })
    .compile();
  return {
    sut: moduleRef.get(service),
    fake: <D extends object>(cls: Type<D>) => {
      const fake = fakes.get(cls);
      if (!fake) throw new Error(`${service.name} does not depend on ${cls.name}`);
      return fake as Fake<D>;
    },
  };
}
