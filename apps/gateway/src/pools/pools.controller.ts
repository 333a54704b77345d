import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { OperatorOnly } from '../auth/roles.decorator.js';
import { CreatePoolDto } from './dto/create-pool.dto.js';
import { UpdatePoolDto } from './dto/update-pool.dto.js';
import { PoolsService } from './pools.service.js';

@ApiTags('pools')
@ApiBearerAuth()
@Controller('api/v1/pools')
export class PoolsController {
  constructor(private readonly pools: PoolsService) {}

  @Get()
  @ApiOperation({ summary: 'Every pool with its admission rules and machine counts' })
  list() {
    return this.pools.list();
  }

  @Post()
  @OperatorOnly()
  @ApiOperation({ summary: 'Create a pool (operator)' })
  create(@Body() body: CreatePoolDto) {
    return this.pools.create(body);
  }

  @Get(':name')
  @ApiOperation({ summary: 'One pool' })
  get(@Param('name') name: string) {
    return this.pools.get(name);
  }

  @Patch(':name')
  @OperatorOnly()
  @ApiOperation({ summary: "Change a pool's rules; null removes a rule (operator)" })
  update(@Param('name') name: string, @Body() body: UpdatePoolDto) {
    return this.pools.update(name, body);
  }

  @Delete(':name')
  @OperatorOnly()
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a pool no machine, deployment or live sandbox uses; 409 says what still does (operator)' })
  async remove(@Param('name') name: string): Promise<void> {
    await this.pools.remove(name);
  }
}
