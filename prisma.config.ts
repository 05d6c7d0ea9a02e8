// Prisma CLI configuration. Prisma's native engines cannot be downloaded on our machines, so the
// CLI runs its schema engine as WebAssembly through the pg driver adapter (see README, "Prisma").
import path from 'node:path';
import { defineConfig } from 'prisma/config';
import { PrismaPg } from '@prisma/adapter-pg';

export default defineConfig({
  schema: path.join('prisma', 'schema.prisma'),
  experimental: { adapter: true },
  engine: 'js',
  async adapter() {
    return new PrismaPg({
      connectionString: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas',
      // let the CLI exit as soon as it is done instead of waiting out idle connections
      allowExitOnIdle: true,
    });
  },
});
