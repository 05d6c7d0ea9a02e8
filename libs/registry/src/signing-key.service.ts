import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import { AppError, TtlLruCache } from '#libs/common';
import { APP_CONFIG, type AppConfig } from '#libs/config';
import { AesGcmKeyCipher, type CardSigningAlgorithm, type KeyCipher, type SigningKey } from '#libs/trust';
import { SigningKeyRepository, type SigningKeyRow } from './signing-key.repository.js';

/** A signing key as callers see it (never the private part). */
export interface SigningKeyInfo {
  id: string;
  kid: string;
  alg: string;
  status: 'active' | 'retired';
  publicJwk: Record<string, unknown>;
  createdAt: Date;
  retiredAt: Date | null;
}

/** A key ready to sign with. */
export interface ActiveSigningKey {
  kid: string;
  alg: CardSigningAlgorithm;
  privateKey: SigningKey;
}

/** How long the active keys of an org are reused on the card path of another instance (ms). */
const ACTIVE_KEYS_TTL_MS = 5_000;
/** Most organizations whose active keys are kept decrypted (least recently used forgotten first). */
const ACTIVE_KEYS_CACHE_MAX = 10_000;

const info = (r: SigningKeyRow): SigningKeyInfo => ({ id: r.id, kid: r.kid, alg: r.alg, status: r.status, publicJwk: r.publicJwk, createdAt: r.createdAt, retiredAt: r.retiredAt });

/**
 * Agent Card signing keys per organization (A2A v1.0 §8.4). ES256 or EdDSA key pairs made with
 * `jose`; the private JWK is stored encrypted by a KeyCipher (AES-256-GCM under
 * SIGNING_KEY_ENCRYPTION_SECRET by default; a KMS can implement KeyCipher). Every active key signs
 * the organization's cards, so rotation is: create the new key (cards carry both signatures),
 * let verifiers pick it up from the JWKS, then retire the old one.
 * Errors: `signing.disabled` (no encryption secret configured), `signing_key.not_found`.
 */
@Injectable()
export class SigningKeyService {
  private readonly cipher: KeyCipher | null;
  private readonly cache = new TtlLruCache<string, Promise<ActiveSigningKey[]>>(ACTIVE_KEYS_CACHE_MAX, ACTIVE_KEYS_TTL_MS);
  private readonly kidsCache = new TtlLruCache<string, Promise<string[]>>(ACTIVE_KEYS_CACHE_MAX, ACTIVE_KEYS_TTL_MS);

  constructor(
    private readonly repo: SigningKeyRepository,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.cipher = config.SIGNING_KEY_ENCRYPTION_SECRET ? new AesGcmKeyCipher(config.SIGNING_KEY_ENCRYPTION_SECRET) : null;
  }

  /** True when keys can be made and used (an encryption secret is configured). */
  get enabled(): boolean {
    return this.cipher !== null;
  }

  private requireCipher(): KeyCipher {
    if (!this.cipher) throw new AppError('signing.disabled', 'card signing is not configured on this deployment (set SIGNING_KEY_ENCRYPTION_SECRET)');
    return this.cipher;
  }

  /** Create a new active key for the org (it signs cards at once, beside the other active keys). */
  async create(orgId: string, alg: CardSigningAlgorithm): Promise<SigningKeyInfo> {
    const cipher = this.requireCipher();
    const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
    const id = randomUUID();
    const kid = `${alg.toLowerCase()}-${id.slice(0, 8)}`;
    const publicJwk: JWK = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
    const privateJwk = await exportJWK(privateKey);
    const row = await this.repo.insert({ id, orgId, kid, alg, publicJwk: publicJwk as Record<string, unknown>, privateKeyEnc: cipher.encrypt(JSON.stringify(privateJwk)) });
    this.forget(orgId);
    return info(row);
  }

  private forget(orgId: string): void {
    this.cache.delete(orgId);
    this.kidsCache.delete(orgId);
  }

  async list(orgId: string): Promise<SigningKeyInfo[]> {
    return (await this.repo.list(orgId)).map(info);
  }

  /**
   * Retire a key: it stops signing and leaves the JWKS. Throws `signing_key.not_found`, and
   * `signing_key.in_use` when it is the last active key while an agent of the org serves a card
   * declaring `signedAgentCard` (create the next key first: rotation is create-then-retire).
   */
  async retire(orgId: string, id: string): Promise<SigningKeyInfo> {
    const step = /^[0-9a-f-]{36}$/i.test(id) ? await this.repo.retire(orgId, id) : ({ ok: false, reason: 'not_found' } as const);
    if (!step.ok && step.reason === 'not_found') throw new AppError('signing_key.not_found', `no signing key ${id}`, { details: { id } });
    if (!step.ok) {
      throw new AppError('signing_key.in_use', `signing key ${id} is the organization's last active key and an agent's card declares signedAgentCard: create another key first`, { details: { id } });
    }
    this.forget(orgId);
    return info(step.row);
  }

  /** The org's active keys, decrypted and imported (cached for a few seconds). Empty when signing is off. */
  activeKeys(orgId: string): Promise<ActiveSigningKey[]> {
    if (!this.cipher) return Promise.resolve([]);
    const hit = this.cache.get(orgId);
    if (hit) return hit;
    const cipher = this.cipher;
    const keys = this.repo.active(orgId).then((rows) =>
      Promise.all(
        rows.map(async (r) => ({ kid: r.kid, alg: r.alg as CardSigningAlgorithm, privateKey: (await importJWK(JSON.parse(cipher.decrypt(r.privateKeyEnc)) as JWK, r.alg)) as SigningKey })),
      ),
    );
    keys.catch(() => this.cache.delete(orgId));
    this.cache.set(orgId, keys);
    return keys;
  }

  /**
   * The `kid`s of the org's active keys, oldest first (cached as `activeKeys`). Needs no
   * encryption secret: which keys sign a card is known to every process, signing or not.
   */
  activeKids(orgId: string): Promise<string[]> {
    const hit = this.kidsCache.get(orgId);
    if (hit) return hit;
    const kids = this.repo.active(orgId).then((rows) => rows.map((r) => r.kid));
    kids.catch(() => this.kidsCache.delete(orgId));
    this.kidsCache.set(orgId, kids);
    return kids;
  }

  /** The org's public JWKS (RFC 7517): its active keys. */
  async jwks(orgSlug: string): Promise<{ keys: Array<Record<string, unknown>> }> {
    return { keys: (await this.repo.activeBySlug(orgSlug)).map((r) => r.publicJwk) };
  }
}
