import { Controller, Get, Param, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { AppError } from '#libs/common';
import { ExtensionRegistry } from '#libs/extensions';

/**
 * The specification of every registered extension that has one, served at its URI's path
 * (`GET /extensions/<name>/<version>`, text/markdown): an extension URI of this service resolves
 * to its document. Public.
 */
@ApiExcludeController()
@Controller('extensions')
export class ExtensionDocsController {
  constructor(private readonly extensions: ExtensionRegistry) {}

  @Get(':name/:version')
  doc(@Param('name') name: string, @Param('version') version: string, @Res() reply: FastifyReply): void {
    const path = `/extensions/${name}/${version}`;
    const plugin = this.extensions.list().find((p) => p.specDocument && safePath(p.uri) === path);
    if (!plugin) throw new AppError('extension.not_found', `no extension is specified at ${path.slice(0, 200)}`);
    void reply.status(200).headers({ 'content-type': 'text/markdown; charset=utf-8', 'cache-control': 'public, max-age=3600' }).send(plugin.specDocument);
  }
}

function safePath(uri: string): string | null {
  try {
    return new URL(uri).pathname;
  } catch {
    return null;
  }
}
