import { InvokeError, validatePayload } from '#tern/messaging';

/** A request body the agent answers over the invoke protocol, parsed as JSON and validated: a 400 saying why otherwise. */
export async function bodyOf<T extends object>(cls: new () => T, body: Uint8Array): Promise<T> {
  let plain: unknown;
  try {
    plain = body.length ? JSON.parse(Buffer.from(body).toString('utf8')) : {};
  } catch (e) {
    throw new InvokeError(400, `body is not JSON: ${(e as Error).message}`);
  }
  const decoded = await validatePayload(cls, plain);
  if (!decoded.ok) throw new InvokeError(400, decoded.reason);
  return decoded.value;
}
