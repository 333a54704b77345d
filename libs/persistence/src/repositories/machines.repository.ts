import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** Every statement on machines and pools (registration, credentials, state, offers). */
@Injectable()
export class MachinesRepository {
  constructor(private readonly db: DataSource) {}
}
