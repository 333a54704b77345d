import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** Every statement on tasks (the task state machine, the submission outbox, TTL expiry, callbacks). */
@Injectable()
export class TasksRepository {
  constructor(private readonly db: DataSource) {}
}
