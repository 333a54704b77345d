import { createServer } from 'node:net';
import pg from 'pg';
import { QueryFailedError } from 'typeorm';
import { databasePort, databaseUnavailable } from './database-unavailable.js';

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('databaseUnavailable', () => {
  it('names a refused connection, as node-postgres reports it for a stopped server', async () => {
    const port = await closedPort();
    const client = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/x` });
    const refused = await client.connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(databaseUnavailable(refused)).toMatch(/^ECONNREFUSED/);
    expect(databaseUnavailable(refused, { port })).toMatch(/^ECONNREFUSED/);
    // The same refusal from another port (a registry, a runner) is not the database's.
    expect(databaseUnavailable(refused, { port: port + 1 })).toBeUndefined();
  });

  it("reads the database's port from its URL", () => {
    expect(databasePort('postgres://postgres:pw@db.internal:6543/tern')).toBe(6543);
    expect(databasePort('postgres://postgres@127.0.0.1/tern')).toBe(5432);
    expect(databasePort('not a url')).toBeUndefined();
  });

  it("names a server shutting down under a query, and a pool's connection timeout", () => {
    const shutdown = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    expect(databaseUnavailable(new QueryFailedError('SELECT 1', [], shutdown))).toMatch(/^57P01/);
    expect(databaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe('timeout exceeded when trying to connect');
    expect(databaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe('Connection terminated unexpectedly');
  });

  it("leaves a query's own failure (bad input, a constraint) and other errors alone", () => {
    const badUuid = Object.assign(new Error('invalid input syntax for type uuid: "x"'), { code: '22P02' });
    expect(databaseUnavailable(new QueryFailedError('SELECT 1', [], badUuid))).toBeUndefined();
    const unique = Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' });
    expect(databaseUnavailable(new QueryFailedError('INSERT', [], unique))).toBeUndefined();
    expect(databaseUnavailable(new Error('something else'))).toBeUndefined();
    expect(databaseUnavailable('a string')).toBeUndefined();
  });
});
