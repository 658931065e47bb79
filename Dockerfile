# prefixmesh: one mesh node per container, CPU only (embedded llama.cpp's CPU build, or a remote
# OpenAI-compatible engine behind --engine openai). How to run it: docs/deploy.md.
#
#   docker build -t prefixmesh:0.1.0 .
#   docker run --rm -p 8080:8080 --shm-size 512m prefixmesh:0.1.0 node --id A
#
# Debian (glibc), not Alpine: node-llama-cpp's prebuilt CPU build links against glibc.
# BASE_IMAGE: any Debian bookworm image with Node 20 on PATH and a `node` user (uid 1000), e.g. one
# made without a registry by scripts/container-base.sh (docs/deploy.md, "Check the image").
ARG BASE_IMAGE=node:20-bookworm-slim

# --- build: compile TypeScript with the dev dependencies -------------------------------------------
FROM ${BASE_IMAGE} AS build
WORKDIR /app
# The empty stand-in for node-llama-cpp's GPU builds must be there before npm ci (package.json overrides).
COPY package.json package-lock.json .npmrc ./
COPY deploy/no-gpu-build/package.json deploy/no-gpu-build/package.json
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src/ src/
RUN npm run build

# --- deps: the production dependencies only (no compiler, no test tools, no GPU builds) ------------
FROM ${BASE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY deploy/no-gpu-build/package.json deploy/no-gpu-build/package.json
RUN npm ci --omit=dev

# --- runtime --------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS runtime
# openssl: `prefixmesh certs init/issue` run inside the image; ca-certificates: https to a remote engine.
RUN apt-get update \
  && apt-get install -y --no-install-recommends openssl ca-certificates \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production \
    PREFIXMESH_LISTEN=0.0.0.0:8080 \
    PREFIXMESH_PEER_LISTEN=0.0.0.0:9080 \
    PREFIXMESH_CACHE_DIR=/var/lib/prefixmesh
# package.json marks dist/ as ES modules; the stand-in keeps node_modules' links to it whole.
COPY --from=deps /app/package.json ./package.json
COPY --from=deps /app/deploy/no-gpu-build/ deploy/no-gpu-build/
COPY --from=deps /app/node_modules/ node_modules/
COPY --from=build /app/dist/ dist/
# The node user (uid 1000) of the base image; generated models are cached in its own directory.
RUN mkdir -p /var/lib/prefixmesh && chown node:node /var/lib/prefixmesh
USER node
VOLUME ["/var/lib/prefixmesh"]
# 8080: client API (OpenAI-compatible, /health, /ready, /metrics). 9080: peer port (other nodes only).
EXPOSE 8080 9080
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "/app/dist/cli/main.js"]
CMD ["--help"]
