import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** Every statement on containers (placement records and their lifecycle). */
@Injectable()
export class ContainersRepository {
  constructor(private readonly db: DataSource) {}
}
