import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** Every statement on workspaces and their API tokens. */
@Injectable()
export class TokensRepository {
  constructor(private readonly db: DataSource) {}
}
