# syntax=docker/dockerfile:1
# compaction-gateway container image. Build: docker build -t compaction-gateway:0.1.0 .
# Run:   docker run -p 127.0.0.1:8080:8080 -e UPSTREAM_URL=https://api.openai.com/v1 compaction-gateway:0.1.0
#        (clients send their own provider key). With the provider key in the gateway
#        (-e UPSTREAM_API_KEY), set -e GATEWAY_API_KEYS too: on HOST=0.0.0.0 the gateway refuses to
#        start holding the provider key with no gateway key, unless -e GATEWAY_ALLOW_OPEN=1.
# Config: mount a YAML file at /app/config/default.yaml, or anywhere with CONFIG=/path/to/file.
ARG NODE_VERSION=26
# Unset by default. An offline build passes them to npm (npm reads npm_config_* from the
# environment): --build-arg npm_config_cache=/npm-cache --build-arg npm_config_offline=true
# with a copy of an npm cache mounted there (-v CACHE:/npm-cache). Declared in each stage,
# since an ARG only reaches the RUN steps of the stage that declares it.

FROM node:${NODE_VERSION}-slim AS build
ARG npm_config_cache
ARG npm_config_offline
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
RUN npm ci --no-audit --no-fund
COPY src ./src
RUN npm run build

FROM node:${NODE_VERSION}-slim AS runtime
ARG npm_config_cache
ARG npm_config_offline
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "dist/main.js"]
