import { Controller, Delete, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { WorkspaceAdminOnly } from '../auth/roles.decorator.js';
import { DeleteImageQuery } from './dto/delete-image.query.js';
import { ImageDeletes } from './image-deletes.service.js';

@ApiTags('images')
@ApiBearerAuth()
@Controller('api/v1/images')
export class ImagesController {
  constructor(private readonly deletes: ImageDeletes) {}

  @Delete()
  @WorkspaceAdminOnly()
  @ApiOperation({
    summary: "Delete an image from Tern's registry (workspace admin: its own builds; operator: any)",
    description:
      "Removes the manifest `ref` names, and every tag naming it; its blobs go at the registry's next garbage collection. 409 naming the deployments (latest version) and live sandboxes that run it; 404 for an image that is not the workspace's or not there.",
  })
  remove(@CurrentPrincipal() p: Principal, @Query() query: DeleteImageQuery) {
    return this.deletes.delete(p, query.ref);
  }
}
