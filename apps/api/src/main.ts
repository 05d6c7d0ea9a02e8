import { loadConfig } from '#libs/config';
import { createApiApp } from './app.factory.js';

/** API process entry point: A2A endpoints, Agent Cards and the admin API on PORT. */
async function main(): Promise<void> {
  const config = loadConfig();
  const app = await createApiApp();
  await app.listen(config.PORT, config.HOST);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
