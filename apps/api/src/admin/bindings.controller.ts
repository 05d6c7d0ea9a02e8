import { Body, Controller, Get, Param, Patch, Put, Res, UseGuards, UseInterceptors, UsePipes } from '@nestjs/common';
import { ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import {
  A2ABindingSchema,
  PatchA2ABindingSchema,
  PutA2ABindingResponseSchema,
  PutA2ABindingSchema,
  type A2ABindingResponse,
  type PatchA2ABinding,
  type PutA2ABinding,
  type PutA2ABindingResponse,
} from '#libs/contracts';
import { BindingService, type Principal } from '#libs/registry';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { toBindingResponse } from './admin.mappers.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';
import { AGENT_PARAM_DOC } from './agents.controller.js';
import { RegistryCacheInterceptor } from './registry-cache.interceptor.js';

@ApiTags('bindings')
@Controller('v1/agents/:agent/bindings/a2a')
@UseInterceptors(RegistryCacheInterceptor)
@ApiParam(AGENT_PARAM_DOC)
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class BindingsController {
  constructor(private readonly bindings: BindingService) {}

  @Put()
  @ApiOperation({ summary: 'Create or replace the A2A binding (path /a2a/<org>/<agent>; omitted fields take defaults); `warnings` flags an open binding (security none)' })
  @ApiResponse({ status: 201, description: 'Created', standardSchema: PutA2ABindingResponseSchema, example: ADMIN_EXAMPLES.putBinding.response })
  @ApiResponse({ status: 200, description: 'Replaced', standardSchema: PutA2ABindingResponseSchema, example: ADMIN_EXAMPLES.putBinding.openResponse })
  @RequestExamples(ADMIN_EXAMPLES.putBinding.request)
  @AdminRoute(400, 404, 409, 422)
  async put(
    @CurrentPrincipal() principal: Principal,
    @Param('agent') agentRef: string,
    @Body({ schema: PutA2ABindingSchema }) body: PutA2ABinding,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<PutA2ABindingResponse> {
    const { binding, created, warnings } = await this.bindings.put(principal.orgId, agentRef, body);
    void reply.status(created ? 201 : 200);
    return { ...toBindingResponse(binding), warnings };
  }

  @Patch()
  @ApiOperation({ summary: 'Change some fields of the A2A binding ({ enabled: false } disables it)' })
  @ApiResponse({ status: 200, standardSchema: A2ABindingSchema, example: ADMIN_EXAMPLES.patchBinding.response })
  @RequestExamples(ADMIN_EXAMPLES.patchBinding.request)
  @AdminRoute(400, 404, 422)
  async update(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string, @Body({ schema: PatchA2ABindingSchema }) body: PatchA2ABinding): Promise<A2ABindingResponse> {
    return toBindingResponse(await this.bindings.update(principal.orgId, agentRef, body));
  }

  @Get()
  @ApiOperation({ summary: 'The A2A binding' })
  @ApiResponse({ status: 200, standardSchema: A2ABindingSchema, example: ADMIN_EXAMPLES.binding })
  @AdminRoute(404)
  async get(@CurrentPrincipal() principal: Principal, @Param('agent') agentRef: string): Promise<A2ABindingResponse> {
    return toBindingResponse(await this.bindings.get(principal.orgId, agentRef));
  }
}
