import { IsInt, Min } from 'class-validator';

/**
 * The HTTP leg of an agent's network test, authenticated with the machine token:
 * `POST /api/v1/machine/network-test` (body `application/octet-stream`, read and thrown away)
 * and `GET /api/v1/machine/network-test?bytes=N` (N bytes back). Bounded so the routes cannot
 * be used to burn the gateway's bandwidth: a bigger N answers 400, a bigger body 413.
 */
export const NETWORK_TEST_HTTP_PATH = '/api/v1/machine/network-test';
export const NETWORK_TEST_HTTP_MAX_BYTES = 32 * 1024 * 1024;

export class NetworkTestSinkResponse {
  @IsInt() @Min(0) receivedBytes!: number;
}
