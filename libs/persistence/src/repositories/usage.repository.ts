import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** Every statement on usage intervals, metered containers and tasks, and the usage/rewards reports. */
@Injectable()
export class UsageRepository {
  constructor(private readonly db: DataSource) {}
}
