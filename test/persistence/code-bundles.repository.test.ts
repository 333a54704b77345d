import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { CodeBundle, CodeBundlesRepository, Workspace } from '#tern/persistence';
import { migratedDatabase } from '../support/database.js';

const database = migratedDatabase('codebundles');
let db: DataSource;
let bundles: CodeBundlesRepository;

beforeAll(async () => {
  db = database.db;
  bundles = new CodeBundlesRepository(db);
});

const workspace = async () => (await db.getRepository(Workspace).save({ name: `ws-${randomUUID()}` })).id;
const digest = () => `sha256:${randomUUID().replaceAll('-', '').padEnd(64, '0')}`;

describe('CodeBundlesRepository', () => {
  it("records a workspace's upload once, and answers ownership per workspace", async () => {
    const [a, b] = [await workspace(), await workspace()];
    const code = digest();
    expect(await bundles.isOwnedBy(a, code)).toBe(false);
    await Promise.all([bundles.record(a, code), bundles.record(a, code)]);
    await bundles.record(a, code);
    expect(await bundles.isOwnedBy(a, code)).toBe(true);
    expect(await bundles.isOwnedBy(b, code)).toBe(false);
    await bundles.record(b, code);
    expect(await bundles.isOwnedBy(b, code)).toBe(true);
    expect(await db.getRepository(CodeBundle).countBy({ digest: code })).toBe(2);
  });

  it("forgets a workspace's claims with the workspace", async () => {
    const a = await workspace();
    const code = digest();
    await bundles.record(a, code);
    await db.getRepository(Workspace).delete(a);
    expect(await bundles.isOwnedBy(a, code)).toBe(false);
  });
});
