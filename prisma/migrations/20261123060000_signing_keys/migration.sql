-- Agent Card signing keys, per organization. The private key is stored encrypted (AES-256-GCM
-- under SIGNING_KEY_ENCRYPTION_SECRET, behind a KeyCipher interface a KMS can implement). The
-- public JWK is served at /a2a/<org>/.well-known/jwks.json while the key is active.
CREATE TABLE "signing_keys" (
    "id" UUID NOT NULL,
    "org_id" UUID NOT NULL,
    "kid" TEXT NOT NULL,
    "alg" TEXT NOT NULL,
    "public_jwk" JSONB NOT NULL,
    "private_key_enc" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'active',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "retired_at" TIMESTAMPTZ(3),

    CONSTRAINT "signing_keys_pkey" PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX "signing_keys_kid_key" ON "signing_keys"("kid");
CREATE INDEX "signing_keys_org_id_status_idx" ON "signing_keys"("org_id", "status");

ALTER TABLE "signing_keys" ADD CONSTRAINT "signing_keys_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;
