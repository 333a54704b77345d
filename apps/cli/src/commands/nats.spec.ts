import { InvalidArgumentError } from 'commander';
import { renderNatsUsers, scopesFrom } from './nats.js';

describe('tern nats user', () => {
  it('reads --allow as the scopes, once each', () => {
    expect(scopesFrom('events,submit')).toEqual(['events', 'submit']);
    expect(scopesFrom(' submit , submit ')).toEqual(['submit']);
  });

  it('refuses an unknown or empty --allow, naming what it takes', () => {
    expect(() => scopesFrom('events,admin')).toThrow(InvalidArgumentError);
    expect(() => scopesFrom('events,admin')).toThrow('takes events and/or submit, comma-separated, not admin');
    expect(() => scopesFrom(',')).toThrow('takes events and/or submit');
  });

  it('lists users with their scopes and when they were revoked', () => {
    const text = renderNatsUsers([
      {
        id: 'u1',
        name: 'bridge',
        workspaceId: 'w1',
        scopes: ['events', 'submit'],
        publicKey: 'UABC',
        createdAt: '2026-01-01T00:00:00.000Z',
        revokedAt: '2026-01-02T00:00:00.000Z',
      },
    ]);
    expect(text).toContain('events,submit');
    expect(text).toContain('2026-01-02T00:00:00.000Z');
  });
});
