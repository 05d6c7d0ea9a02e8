import { createHash, randomUUID } from 'node:crypto';
import { mkdir, open } from 'node:fs/promises';
import path from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import { AppError } from '#libs/common';
import type { AppConfig } from '#libs/config';

/**
 * Where retention writes a batch's run archive before it removes the runs (docs/architecture.md
 * "Retention"): a directory or an S3-compatible bucket. `write` resolves only once the archive is
 * durable (fsynced file; stored object whose size and ETag were checked) and rejects with
 * `archive.write_failed` otherwise; the caller then removes nothing.
 */
export interface ArchiveTarget {
  /** `dir` or `s3`: the metric label of failures. */
  readonly kind: 'dir' | 's3';
  /**
   * Write one batch of organization `orgId`: `body` is the archive's JSON Lines (UTF-8, one line per
   * run, each ending in `\n`). Resolves to where it went (a file path or `s3://bucket/key`).
   */
  write(orgId: string, body: Buffer): Promise<string>;
  /** Release connections (the S3 client's sockets). */
  close(): void;
}

/**
 * The name of one batch's archive: `runs-<UTC time, ms>-<batch id>.jsonl`, e.g.
 * `runs-20261127T031800123Z-0193….jsonl`. Names of one organization sort by the time they were
 * written; the batch id (a random UUID) keeps two batches of the same millisecond apart.
 */
export function archiveName(now = new Date(), batchId: string = randomUUID()): string {
  return `runs-${now.toISOString().replace(/[-:.]/g, '')}-${batchId}.jsonl`;
}

/** A file per batch under `<dir>/<org id>/`, created exclusively (never overwrites) and fsynced. */
export class DirectoryArchiveTarget implements ArchiveTarget {
  readonly kind = 'dir';

  constructor(private readonly dir: string) {}

  async write(orgId: string, body: Buffer): Promise<string> {
    const file = path.join(this.dir, orgId, archiveName());
    try {
      await mkdir(path.dirname(file), { recursive: true });
      const fh = await open(file, 'wx');
      try {
        await fh.writeFile(body);
        await fh.sync();
      } finally {
        await fh.close();
      }
    } catch (e) {
      throw writeFailed(file, e);
    }
    return file;
  }

  close(): void {}
}

/** The bucket and key prefix of `s3://bucket[/prefix]` (the prefix without slashes at its ends; may be ''). */
export function parseS3Url(url: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(url);
  if (!m) throw new AppError('request.invalid', `not an s3:// URL: ${url}`);
  return { bucket: m[1]!, prefix: m[2]!.replace(/^\/+|\/+$/g, '') };
}

/** What the S3 target needs: the config's RETENTION_ARCHIVE_S3_* values. */
export interface S3TargetOptions {
  url: string;
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
  /** Per request (connect + response), ms. */
  requestTimeoutMs?: number;
}

/**
 * One object per batch, key `<prefix>/<org id>/runs-<time>-<batch id>.jsonl`, through
 * `@aws-sdk/client-s3` (credentials and, when not given, the region from the SDK's default chain:
 * AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_REGION, profiles, instance roles). The PUT
 * carries `Content-MD5` (the server refuses a body that arrived altered) and `If-None-Match: *`
 * (a server that supports conditional writes refuses to replace an object); afterwards the
 * object's HEAD must show the same size and ETag as the PUT answered, else the write failed.
 * The SDK is loaded at the first write (processes without an S3 target never load it).
 */
export class S3ArchiveTarget implements ArchiveTarget {
  readonly kind = 's3';
  private client?: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(private readonly options: S3TargetOptions) {
    ({ bucket: this.bucket, prefix: this.prefix } = parseS3Url(options.url));
  }

  async write(orgId: string, body: Buffer): Promise<string> {
    const key = [this.prefix, orgId, archiveName()].filter((p) => p.length > 0).join('/');
    const where = `s3://${this.bucket}/${key}`;
    try {
      const { S3Client, PutObjectCommand, HeadObjectCommand } = await import('@aws-sdk/client-s3');
      const timeout = this.options.requestTimeoutMs ?? 30_000;
      this.client ??= new S3Client({
        ...(this.options.endpoint ? { endpoint: this.options.endpoint } : {}),
        ...(this.options.region ? { region: this.options.region } : {}),
        forcePathStyle: this.options.forcePathStyle ?? false,
        // the next pass retries: a short retry budget keeps the batch's transaction short
        maxAttempts: 2,
        requestHandler: { connectionTimeout: Math.min(timeout, 5_000), requestTimeout: timeout },
      });
      const put = await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentLength: body.length,
          ContentType: 'application/x-ndjson',
          ContentMD5: createHash('md5').update(body).digest('base64'),
          IfNoneMatch: '*',
        }),
      );
      if (put.$metadata.httpStatusCode !== 200 || !put.ETag) throw new Error(`PUT answered ${put.$metadata.httpStatusCode} without an ETag`);
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      if (head.ContentLength !== body.length) throw new Error(`the stored object has ${head.ContentLength} bytes, ${body.length} were written`);
      if (head.ETag !== put.ETag) throw new Error(`the stored object's ETag ${head.ETag} is not the PUT's ${put.ETag}`);
    } catch (e) {
      throw writeFailed(where, e);
    }
    return where;
  }

  close(): void {
    this.client?.destroy();
  }
}

/** The configured target: RETENTION_ARCHIVE_S3_URL → S3, RETENTION_ARCHIVE_DIR → directory, neither → none. */
export function archiveTargetFrom(config: AppConfig): ArchiveTarget | undefined {
  if (config.RETENTION_ARCHIVE_S3_URL) {
    return new S3ArchiveTarget({
      url: config.RETENTION_ARCHIVE_S3_URL,
      endpoint: config.RETENTION_ARCHIVE_S3_ENDPOINT,
      region: config.RETENTION_ARCHIVE_S3_REGION,
      forcePathStyle: config.RETENTION_ARCHIVE_S3_FORCE_PATH_STYLE,
      requestTimeoutMs: config.RETENTION_ARCHIVE_S3_TIMEOUT_MS,
    });
  }
  if (config.RETENTION_ARCHIVE_DIR) return new DirectoryArchiveTarget(config.RETENTION_ARCHIVE_DIR);
  return undefined;
}

function writeFailed(where: string, cause: unknown): AppError {
  const why = cause instanceof Error ? cause.message || cause.name : String(cause);
  return new AppError('archive.write_failed', `could not write the run archive ${where}: ${why}`, { cause, retryable: true, details: { where } });
}
