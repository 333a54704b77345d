import { IsInt, IsString, Max, MaxLength, Min } from 'class-validator';
import { defineContract } from '../contract.js';

/**
 * Largest filler one echo may carry either way. NATS' default max_payload is 1 MiB; the agent
 * also stays under the max_payload its server announces.
 */
export const NETWORK_ECHO_MAX_BYTES = 1_048_576;

export class NetworkEcho {
  /** Filler the agent sends up; its length is what the upload leg measures. */
  @IsString() @MaxLength(NETWORK_ECHO_MAX_BYTES) data!: string;
  /** Filler bytes the answer carries back down (0 for a latency probe or an upload leg). */
  @IsInt() @Min(0) @Max(NETWORK_ECHO_MAX_BYTES) replyBytes!: number;
}

export class NetworkEchoReply {
  /** Length of the filler that arrived. */
  @IsInt() @Min(0) receivedBytes!: number;
  @IsString() data!: string;
}

export const NETWORK_TEST_ECHO = defineContract({
  subject: 'tern.nettest.*.echo.v1',
  kind: 'request',
  payload: NetworkEcho,
  reply: NetworkEchoReply,
  description:
    "The NATS leg of an agent's network test: the agent sends filler up (data) and asks for filler back (replyBytes), timing round trips for throughput and small ones for latency. Token: the testing machine's id. Sent by the agent when it joins; answered by the gateway (one replica). Outside tern.machine.> so the EVENTS stream never stores it.",
});
