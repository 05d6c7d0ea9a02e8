-- Stored Agent Card signatures (A2A v1.0 section 8.4), computed once per card version.
--   card_digest  base64url SHA-256 of the unsigned card as served (its exact JSON bytes) and the jku
--                its signatures name: one row per card version, shape (v1.0, v0.3) and kind
--                (public, extended)
--   kids         the active signing keys that signed it, in creation order, comma separated
--   signatures   the AgentCardSignature list, in the order of kids
-- The first instance to sign a card version inserts the row (ON CONFLICT DO NOTHING) and every
-- instance serves that row, so ES256 (randomized) signatures never differ between instances.
CREATE TABLE "card_signatures" (
    "org_id" UUID NOT NULL,
    "card_digest" TEXT NOT NULL,
    "kids" TEXT NOT NULL,
    "signatures" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "card_signatures_pkey" PRIMARY KEY ("org_id", "card_digest", "kids")
);

ALTER TABLE "card_signatures" ADD CONSTRAINT "card_signatures_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;
