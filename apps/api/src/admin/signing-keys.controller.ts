import { Body, Controller, Get, HttpCode, Param, Post, UseGuards, UsePipes } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CreateSigningKeySchema, SigningKeyListSchema, SigningKeySchema, type CreateSigningKey, type SigningKeyResponse } from '#libs/contracts';
import { SigningKeyService, type Principal, type SigningKeyInfo } from '#libs/registry';
import { AdminAuthGuard, CurrentPrincipal } from './admin-auth.guard.js';
import { ADMIN_EXAMPLES, AdminRoute, RequestExamples } from './admin-openapi.js';
import { AdminValidationPipe } from './admin-validation.pipe.js';

const toResponse = (k: SigningKeyInfo): SigningKeyResponse => ({
  id: k.id,
  kid: k.kid,
  alg: k.alg,
  status: k.status,
  publicJwk: k.publicJwk,
  createdAt: k.createdAt.toISOString(),
  retiredAt: k.retiredAt ? k.retiredAt.toISOString() : null,
});

/**
 * Agent Card signing keys of the caller's organization. Every active key signs the org's cards;
 * rotate by creating the new key, then retiring the old one once verifiers have the new JWKS.
 */
@ApiTags('signing-keys')
@Controller('v1/signing-keys')
@UseGuards(AdminAuthGuard)
@UsePipes(AdminValidationPipe)
export class SigningKeysController {
  constructor(private readonly keys: SigningKeyService) {}

  @Post()
  @HttpCode(201)
  @ApiOperation({ summary: 'Create a signing key (ES256 or EdDSA); it signs cards at once' })
  @ApiResponse({ status: 201, standardSchema: SigningKeySchema, example: ADMIN_EXAMPLES.createSigningKey.response })
  @RequestExamples(ADMIN_EXAMPLES.createSigningKey.request)
  @AdminRoute(409, 422)
  async create(@CurrentPrincipal() principal: Principal, @Body({ schema: CreateSigningKeySchema }) body: CreateSigningKey): Promise<SigningKeyResponse> {
    return toResponse(await this.keys.create(principal.orgId, body.alg));
  }

  @Get()
  @ApiOperation({ summary: "The organization's signing keys (public parts)" })
  @ApiResponse({ status: 200, standardSchema: SigningKeyListSchema, example: ADMIN_EXAMPLES.signingKeys })
  @AdminRoute()
  async list(@CurrentPrincipal() principal: Principal): Promise<{ signingKeys: SigningKeyResponse[] }> {
    return { signingKeys: (await this.keys.list(principal.orgId)).map(toResponse) };
  }

  @Post(':id/retire')
  @HttpCode(200)
  @ApiOperation({ summary: 'Retire a signing key: it stops signing and leaves the JWKS' })
  @ApiResponse({ status: 200, standardSchema: SigningKeySchema, example: ADMIN_EXAMPLES.retireSigningKey })
  @AdminRoute(404)
  async retire(@CurrentPrincipal() principal: Principal, @Param('id') id: string): Promise<SigningKeyResponse> {
    return toResponse(await this.keys.retire(principal.orgId, id));
  }
}
