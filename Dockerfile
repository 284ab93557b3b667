# syntax=docker/dockerfile:1
# One image, every role: `server` (default), `worker`, `migrate`, `start` (see docs/deploy.md).

# Build stage: the dev dependencies compile TypeScript to dist/.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
RUN npm run build

# Runtime stage: production dependencies and compiled JavaScript only (no tsx, no esbuild, no embedded
# Postgres). node is PID 1 and handles SIGTERM itself (drain, hand running tasks back); compose adds
# `init: true` to reap children.
FROM node:24-bookworm-slim
# A young generation of 8 MB semi-spaces instead of V8's default: an instance's RSS after warm-up 255 -> 167 MB,
# and 1.15x (not 1.3x) after 90,000 mixed and hostile requests, throughput unchanged (npm run bench).
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 NODE_OPTIONS=--max-semi-space-size=8
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.METRICS_PORT||process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "dist/src/cli/main.js"]
CMD ["server"]
