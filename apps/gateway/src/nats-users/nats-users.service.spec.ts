import { createAccount } from '@nats-io/nkeys';
import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { QueryFailedError } from 'typeorm';
import { TERN_CONFIG } from '#tern/config';
import { newUserKey } from '#tern/nats-auth';
import { NatsUsersRepository, TokensRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { CreateNatsUserDto } from './dto/create-nats-user.dto.js';
import { NatsAccount } from './nats-account.js';
import { NatsUsersService } from './nats-users.service.js';

const admin: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 'tok1', role: 'admin' };
const operator: Principal = { workspaceId: 'w-ops', workspaceName: 'ops', tokenId: 'tok-op', role: 'operator' };
const CONFIG = { nats: { namespace: 'tern' }, machines: { natsPublicUrls: ['nats://nats.example:4222'] } };
const signer = () => ({ account: createAccount().getPublicKey(), signingKey: new TextDecoder().decode(createAccount().getSeed()) });
const body = (over: Partial<CreateNatsUserDto> = {}) =>
  ({ name: 'bridge', allow: ['events'], publicKey: newUserKey().publicKey, ...over }) as CreateNatsUserDto;
const uniqueViolation = new QueryFailedError('INSERT INTO nats_users', [], Object.assign(new Error('duplicate key'), { code: '23505' }));

async function natsUsers(enabled = true) {
  const { sut, fake } = await newTestService(NatsUsersService, [[TERN_CONFIG, CONFIG]]);
  const account = fake(NatsAccount);
  Object.defineProperty(account, 'enabled', { value: enabled });
  account.signer.mockReturnValue(signer());
  const workspaces = fake(TokensRepository);
  workspaces.findWorkspace.mockImplementation(async (id) => (['w1', 'w2'].includes(id) ? ({ id } as never) : null));
  const users = fake(NatsUsersRepository);
  users.record.mockImplementation(async (u) => ({ ...u, createdAt: new Date(0), revokedAt: null }) as never);
  return { sut, account, users, workspaces };
}

describe('NatsUsersService.create', () => {
  it('issues a JWT for the key and records the user in the caller workspace', async () => {
    const { sut, users } = await natsUsers();
    const created = await sut.create(admin, body());
    expect(created).toMatchObject({ workspaceId: 'w1', scopes: ['events'], namespace: 'tern', servers: ['nats://nats.example:4222'] });
    expect(created.jwt.split('.')).toHaveLength(3);
    expect(users.record).toHaveBeenCalledWith(expect.objectContaining({ id: created.id, workspaceId: 'w1', name: 'bridge' }));
  });

  it('refuses a key with a bad checksum: a 400 from the body rule, and no row from the signer', async () => {
    const { sut, users } = await natsUsers();
    const good = newUserKey().publicKey;
    const badChecksum = good.slice(0, -1) + (good.endsWith('A') ? 'B' : 'A');
    // The ValidationPipe answers 400 with these messages, before the service runs.
    const problems = await validate(plainToInstance(CreateNatsUserDto, { name: 'bridge', allow: ['events'], publicKey: badChecksum }));
    expect(problems.map((p) => p.property)).toEqual(['publicKey']);
    // Reached anyway, the service signs before it writes: a refused key is a 400 and leaves no user behind.
    await expect(sut.create(admin, body({ publicKey: badChecksum }))).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/^publicKey is not a user public key nkeys accepts \(.*checksum/),
    });
    expect(users.record).not.toHaveBeenCalled();
  });

  it('answers 409 for a key that has a user already', async () => {
    const { sut, users } = await natsUsers();
    users.record.mockRejectedValue(uniqueViolation);
    await expect(sut.create(admin, body())).rejects.toMatchObject({
      status: 409,
      message: 'this public key has a NATS user already: make a new key pair for each user',
    });
  });

  it('lets only an operator act for another workspace (403), and answers 404 for an unknown one', async () => {
    const { sut, users } = await natsUsers();
    await expect(sut.create(admin, body({ workspace: 'w2' }))).rejects.toMatchObject({ status: 403 });
    await expect(sut.list(admin, 'w2')).rejects.toMatchObject({ status: 403 });
    await expect(sut.create(operator, body({ workspace: 'w9' }))).rejects.toMatchObject({ status: 404, message: 'workspace w9 not found' });
    expect(users.record).not.toHaveBeenCalled();
    expect(await sut.create(operator, body({ workspace: 'w2' }))).toMatchObject({ workspaceId: 'w2' });
  });

  it('answers 503 saying what to set when NATS does not run in operator mode', async () => {
    const { sut, users } = await natsUsers(false);
    await expect(sut.create(admin, body())).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/set NATS_ACCOUNT_SIGNER/),
    });
    expect(users.record).not.toHaveBeenCalled();
  });
});

describe('NatsUsersService.revoke', () => {
  const user = { id: 'u1', workspaceId: 'w2', name: 'bridge', publicKey: 'UKEY', revokedAt: null };

  it("answers 404 for another workspace's user, revoking nothing; an operator revokes it", async () => {
    const { sut, users, account } = await natsUsers();
    users.findById.mockResolvedValue(user as never);
    await expect(sut.revoke(admin, 'u1')).rejects.toMatchObject({ status: 404, message: 'NATS user u1 not found in this workspace' });
    expect(account.revoke).not.toHaveBeenCalled();
    await sut.revoke(operator, 'u1');
    expect(account.revoke).toHaveBeenCalledWith(['UKEY']);
    expect(users.markRevoked).toHaveBeenCalledWith('u1');
  });

  it('answers 409 for a user revoked already', async () => {
    const { sut, users, account } = await natsUsers();
    users.findById.mockResolvedValue({ ...user, revokedAt: new Date('2026-01-01T00:00:00Z') } as never);
    await expect(sut.revoke(operator, 'u1')).rejects.toMatchObject({
      status: 409,
      message: 'NATS user u1 was revoked already (2026-01-01T00:00:00.000Z)',
    });
    expect(account.revoke).not.toHaveBeenCalled();
  });
});

describe('NatsUsersService.revokeAllOf (a deleted workspace)', () => {
  it('revokes every active key in one update, and only marks the rows without operator mode', async () => {
    const { sut, users, account } = await natsUsers();
    users.activeOf.mockResolvedValue([
      { id: 'u1', publicKey: 'K1' },
      { id: 'u2', publicKey: 'K2' },
    ] as never);
    expect(await sut.revokeAllOf('w1')).toBe(2);
    expect(account.revoke).toHaveBeenCalledTimes(1);
    expect(account.revoke).toHaveBeenCalledWith(['K1', 'K2']);
    expect(users.markRevoked.mock.calls).toEqual([['u1'], ['u2']]);

    const plain = await natsUsers(false);
    plain.users.activeOf.mockResolvedValue([{ id: 'u3', publicKey: 'K3' }] as never);
    expect(await plain.sut.revokeAllOf('w1')).toBe(1);
    expect(plain.account.revoke).not.toHaveBeenCalled();
    expect(plain.users.markRevoked).toHaveBeenCalledWith('u3');
  });
});
