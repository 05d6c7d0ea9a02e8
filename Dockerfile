# One image for the API, the worker and the migration job; the command picks which.
#   docker build -t aaas .
#   docker run aaas node scripts/migrate.mjs          # migration job (once per release)
#   docker run -p 3000:3000 aaas                       # API (refuses to start if the schema is behind)
#   docker run aaas node dist/apps/worker/src/main.js  # worker
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN node scripts/setup.mjs --build && npm prune --omit=dev

FROM node:22-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
# the runtime stage takes only what runs: compiled code, production dependencies, migrations
COPY --from=build --chown=node:node /app/package.json /app/package-lock.json /app/prisma.config.ts ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --from=build --chown=node:node /app/prisma ./prisma
COPY --from=build --chown=node:node /app/scripts ./scripts
COPY --from=build --chown=node:node /app/libs/db/src/generated ./libs/db/src/generated
COPY --from=build --chown=node:node /app/libs/a2a/proto ./libs/a2a/proto
USER node
EXPOSE 3000
# tini is PID 1: signals reach node (graceful shutdown), zombies are reaped
ENTRYPOINT ["/usr/bin/tini", "--"]
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "dist/apps/api/src/main.js"]
