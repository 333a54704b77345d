import { IsISO8601, IsString } from 'class-validator';

/** The answer to `GET <agentTaskPermitPath(...)>`: the permit's user JWT and when it expires. */
export class AgentTaskPermit {
  /** A user JWT for the machine's own NATS key (the agent adds its seed); permissions: the one consumer. */
  @IsString() jwt!: string;
  /** The agent fetches a new one before then; NATS disconnects the permit at expiry. */
  @IsISO8601() expiresAt!: string;
}
