# One image for every Tern service; the command picks which one runs:
#   docker run tern node dist/apps/scheduler/src/main.js
# The agent needs runc (umoci and skopeo to pull and unpack OCI images; the gateway pins image
# tags with skopeo), nftables and iproute2 (its private container network), so they are in the
# runtime stage too; openssl makes the registry's token key (scripts/registry-token-key.mjs).

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY apps ./apps
COPY libs ./libs
COPY bench ./bench
# The TypeScript SDK (@tern/client), through which the CLI calls the gateway.
COPY sdk/typescript ./sdk/typescript
# The dashboard (/ui): bundled by `npm run build` into dist/ui.
COPY ui ./ui
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends runc umoci skopeo nftables iproute2 ca-certificates openssl tini \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production LOG_FORMAT=json
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
# The handler runners the agent binds into containers at /tern/runners, and the Python SDK it
# binds beside them (/tern/sdk/python) so that a handler's `import tern` works; `tern deploy
# app.py:handler` reads a decorated handler's spec with it too.
COPY runners ./runners
COPY sdk/python ./sdk/python
# scripts/nats-auth.mjs writes the NATS operator material (docker-compose's nats-auth service,
# the k8s Secrets); it runs on dist/ and the yaml package.
COPY scripts ./scripts
# Control-plane services run unprivileged; the agent's manifests override this with root.
USER node
EXPOSE 1994 1995 1996 1997 1998
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/apps/gateway/src/main.js"]
