/**
 * The environment every test process uses: a dedicated database and a Redis key prefix, so
 * tests never touch the demo's data. Override with TEST_DATABASE_URL / TEST_REDIS_URL.
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/aaas_test';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export function testEnv(): Record<string, string> {
  return {
    NODE_ENV: 'test',
    DATABASE_URL: TEST_DATABASE_URL,
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: process.env.REDIS_PREFIX ?? `aaas-test-${process.pid}`,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    // tests look a run's job up after it ran (its payload, its id)
    QUEUE_KEEP_COMPLETED_JOBS: '1000',
  };
}
