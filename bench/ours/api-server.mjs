// Bench child: our API app from the compiled tree (dist/), listening on 127.0.0.1:<random>.
// Prints {"url": "<base url>"} when ready. Exits when its parent closes stdin.
import { createApiApp } from '../../dist/apps/api/src/app.factory.js';

const app = await createApiApp({ LOG_LEVEL: 'silent' });
await app.listen(0, '127.0.0.1');
const { port } = app.getHttpServer().address();
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', async () => {
  await app.close();
  process.exit(0);
});
console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` }));
