import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Encrypts private signing keys at rest. The default is AES-256-GCM under a key derived from a
 * configured secret; a KMS (envelope encryption, an HSM) can implement the same interface.
 */
export interface KeyCipher {
  /** Ciphertext (a printable string) of `plaintext`. */
  encrypt(plaintext: string): string;
  /** The plaintext; throws when the ciphertext was not made by this cipher (tampered, or another key). */
  decrypt(ciphertext: string): string;
}

/** AES-256-GCM with a key = SHA-256(secret); format `v1.<iv>.<tag>.<ciphertext>` (base64url). */
export class AesGcmKeyCipher implements KeyCipher {
  private readonly key: Buffer;

  constructor(secret: string) {
    if (secret.length < 16) throw new Error('the key encryption secret must be at least 16 characters');
    this.key = createHash('sha256').update(`aaas.signing-keys/v1\n${secret}`).digest();
  }

  encrypt(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join('.');
  }

  decrypt(ciphertext: string): string {
    const [v, iv, tag, data] = ciphertext.split('.');
    if (v !== 'v1' || !iv || !tag || data === undefined) throw new Error('not a v1 ciphertext');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
  }
}
