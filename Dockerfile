# syntax=docker/dockerfile:1.7
# One build definition, three images: `runtime` (the API), `workers`, `migrator`.
# Node 26 LTS, the same major the project pins through its `node` dev dependency (.nvmrc).
# TypeScript runs directly on Node 26 (type stripping), so no transpile step; the build stage
# emits the artifacts (openapi.json, permissions.json, tasks.json, schema-version.json), and a
# failing emit fails the image build.

ARG NODE_IMAGE=node:26-bookworm-slim

FROM ${NODE_IMAGE} AS base
WORKDIR /app
ENV NODE_ENV=production

# Production dependencies only, exactly as locked, with the project's fixes to them (patches/, applied
# by patch-package as `npm ci` does through the postinstall script; see docs/patches.md). The dev
# dependencies are installed too, so patch-package is the one the lock file pins (nothing is fetched
# outside it), then pruned before any image copies node_modules. Scripts stay
# off: the `node` dev dependency would download a Node binary.
FROM base AS deps
COPY package.json package-lock.json ./
COPY patches ./patches
RUN npm ci --include=dev --ignore-scripts --no-audit --no-fund \
 && ./node_modules/.bin/patch-package --error-on-fail \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# Emit the build artifacts from code; any broken route rule, invalid permission registry or
# undiscovered unit stops the build here.
FROM deps AS build
COPY src ./src
COPY units ./units
COPY seeders ./seeders
COPY catalog ./catalog
COPY drizzle ./drizzle
COPY sql ./sql
RUN node src/main/cli.ts emit

FROM base AS app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY src ./src
COPY units ./units
COPY seeders ./seeders
COPY catalog ./catalog
COPY drizzle ./drizzle
COPY sql ./sql
COPY --from=build /app/dist ./dist
ENV SVC_TASKS_CATALOG=/app/dist/tasks.json \
    SVC_SCHEMA_VERSION=/app/dist/schema-version.json \
    SVC_PERMISSIONS_REGISTRY=/app/dist/permissions.json
# `svc` on PATH inside every image (Node 26 runs the TypeScript entry point directly).
RUN chmod 755 src/main/cli.ts && ln -s /app/src/main/cli.ts /usr/local/bin/svc
# The official image's unprivileged user.
USER node

FROM app AS runtime
# 3000: the API; 9464: its GET /metrics (SVC_API_METRICS_PORT).
EXPOSE 3000 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:3000/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "src/main/cli.ts", "api"]

FROM app AS workers
EXPOSE 8081
# Readiness, not liveness: /readyz answers 503 until the workers consume and while they drain.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.SVC_HEALTH_PORT||8081)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# --max-semi-space-size=16: shorter GC pauses for the runs in flight (src/main/workers-node-flags.ts).
CMD ["node", "--max-semi-space-size=16", "src/main/cli.ts", "workers"]

# Receives the permission registry emitted by this same build (SVC_PERMISSIONS_REGISTRY above).
FROM app AS migrator
ENTRYPOINT ["node", "src/main/cli.ts", "migrator"]
CMD ["deploy"]
