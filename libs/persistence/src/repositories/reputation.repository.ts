import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** Every statement on reputation machine records and score history. */
@Injectable()
export class ReputationRepository {
  constructor(private readonly db: DataSource) {}
}
