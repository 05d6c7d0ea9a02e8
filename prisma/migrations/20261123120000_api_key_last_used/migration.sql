-- When an API key last authenticated a request (key hygiene: spotting unused keys before revoking
-- them). NULL until its first use. Written after the request, never on its path, at most about
-- once a minute per key (ApiKeyService), so it can lag the real last use by up to a minute.
ALTER TABLE "api_keys" ADD COLUMN "last_used_at" TIMESTAMPTZ(3);
