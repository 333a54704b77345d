import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** Every statement on deployments and their versions. */
@Injectable()
export class DeploymentsRepository {
  constructor(private readonly db: DataSource) {}
}
