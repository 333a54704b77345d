/**
 * The CLI talks to the gateway only through the TypeScript SDK (@tern/client): `ApiClient` is
 * its transport (`request`, `get`, `stream`) and `ApiError` its error, under the CLI's old names.
 */
export { TernApiError as ApiError, TernHttp as ApiClient } from '#tern/client';
