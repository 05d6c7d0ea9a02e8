import { loadConfig } from '#libs/config';
import { checkSchema } from '#libs/db';
import { createApiApp } from './app.factory.js';

/**
 * API process entry point: A2A endpoints, Agent Cards and the admin API on PORT. Refuses to start,
 * with one clear line and exit code 1, when the configuration is invalid, PostgreSQL cannot be
 * reached, or its schema is behind this build (run `npm run db:migrate`, or the migration job).
 */
async function main(): Promise<void> {
  const config = loadConfig();
  const schema = await checkSchema(config.DATABASE_URL);
  if (!schema.reachable) throw new Error(`cannot reach PostgreSQL at ${new URL(config.DATABASE_URL).host}: ${schema.error}`);
  if (schema.pending.length > 0) throw new Error(`the database schema is behind this build (${schema.pending.length} migration(s) not applied: ${schema.pending.join(', ')}); run npm run db:migrate`);
  const app = await createApiApp();
  await app.listen(config.PORT, config.HOST);
}

main().catch((e: unknown) => {
  console.error(`aaas api: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
