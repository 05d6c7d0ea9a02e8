-- Runtime secrets per organization: the keys an `http` runtime signs its requests with and the
-- credentials an `a2a` runtime sends upstream, referenced from a revision by name
-- (`runtime.secret`, `runtime.credentials.secret`) and never stored in it. `ciphertext` is the value
-- encrypted by the platform KeyCipher (AES-256-GCM under RUNTIME_SECRET_ENCRYPTION_SECRET, default
-- SIGNING_KEY_ENCRYPTION_SECRET), bound to (org_id, name): a row copied to another organization does
-- not decrypt. `version` is 1 at creation and grows by one per rotation. Only runs of the
-- organization read it (every query is scoped by org_id).
CREATE TABLE "runtime_secrets" (
    "org_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "ciphertext" TEXT NOT NULL,
    "version" INTEGER NOT NULL DEFAULT 1,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "runtime_secrets_pkey" PRIMARY KEY ("org_id", "name")
);

ALTER TABLE "runtime_secrets" ADD CONSTRAINT "runtime_secrets_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Migration note. Until now `secretEnv` could name ANY variable of the worker environment, so a
-- revision could make a worker send DATABASE_URL (or another organization secret) to its
-- backend. From this release `secretEnv` is accepted only inside the namespace of the revision organization
-- AAAS_RUNTIME_SECRET_<ORG>_<NAME> (<ORG>: the slug upper-cased, every character outside
-- A-Z0-9 as `_`, and when a longer slug namespace also matches, the longer slug owns the name), and
-- the workers refuse anything else at run time (the run fails with a readable reason, nothing is
-- sent). The revisions below reference a name outside their namespace: their next publish is
-- refused (422 runtime.secret_not_allowed) and their runs fail until a new revision references a
-- runtime secret (`secret`, POST /v1/runtime-secrets) or a variable of the namespace.
-- (The block is an E-string with \073 for semicolons, as in the init migration: the migration
-- runner splits scripts on semicolons outside quotes.)
DO E'
DECLARE
    r RECORD\073
    n INTEGER := 0\073
BEGIN
    FOR r IN
        WITH refs AS (
            SELECT v.id, v.org_id, v.agent_id, v.number, v.status::text AS status,
                   COALESCE(v.runtime ->> ''secretEnv'', v.runtime -> ''credentials'' ->> ''secretEnv'') AS secret_env
              FROM agent_revisions v
             WHERE v.runtime ->> ''kind'' IN (''http'', ''a2a'')
        ), owners AS (
            SELECT refs.*, o.slug,
                   (SELECT x.id FROM organizations x
                     WHERE length(refs.secret_env) > length(''AAAS_RUNTIME_SECRET_'' || regexp_replace(upper(x.slug), ''[^A-Z0-9]'', ''_'', ''g'') || ''_'')
                       AND starts_with(refs.secret_env, ''AAAS_RUNTIME_SECRET_'' || regexp_replace(upper(x.slug), ''[^A-Z0-9]'', ''_'', ''g'') || ''_'')
                     ORDER BY length(x.slug) DESC LIMIT 1) AS owner
              FROM refs JOIN organizations o ON o.id = refs.org_id
             WHERE refs.secret_env IS NOT NULL
        )
        SELECT * FROM owners WHERE owner IS DISTINCT FROM org_id ORDER BY slug, agent_id, number
    LOOP
        n := n + 1\073
        RAISE NOTICE ''runtime secrets: revision % (org %, agent %, number %, %) names secretEnv % outside AAAS_RUNTIME_SECRET_%_*: its next publish and its runs are refused'',
            r.id, r.slug, r.agent_id, r.number, r.status, r.secret_env, regexp_replace(upper(r.slug), ''[^A-Z0-9]'', ''_'', ''g'')\073
    END LOOP\073
    IF n > 0 THEN
        RAISE NOTICE ''runtime secrets: % revision(s) reference a worker variable outside the namespace of their organization (see docs/deploy.md, "Security")'', n\073
    END IF\073
END';
