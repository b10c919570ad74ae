# switchyard agent image.
#
#   docker build -t switchyard:dev .                  (users: the official Node.js images)
#   buildah build --network host --build-arg BUILD_IMAGE=B --build-arg RUNTIME_IMAGE=R …
#                                                     (the lab: bases made here from Debian
#                                                      packages, scripts/lab-images.sh)
#
# Both bases must be Debian (bookworm or later). The agent runs on Node.js 24 (the current
# LTS): a build base with an older Node.js gets 24 from the npm registry
# (scripts/install-node.sh), and the runtime gets the build stage's node binary.
ARG BUILD_IMAGE=node:24-bookworm
ARG RUNTIME_IMAGE=node:24-bookworm-slim

FROM ${BUILD_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive
# A CA bundle for npm behind a TLS-intercepting proxy (the lab passes the host's).
ARG NPM_CONFIG_CAFILE
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends \
      clang llvm libbpf-dev libelf-dev zlib1g-dev make g++ python3 pkg-config \
      $(command -v npm >/dev/null || echo npm) >/dev/null \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY scripts/install-node.sh ./scripts/
RUN bash scripts/install-node.sh && mkdir -p /opt/node/bin && cp "$(node -p process.execPath)" /opt/node/bin/node
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error --ignore-scripts
COPY tsconfig.base.json ./
COPY bpf ./bpf
COPY native ./native
COPY src ./src
COPY bin ./bin
# Only what the agent runs: the programs, the addon and the compiled control plane
# (src/ only; the tests, benchmarks and lab tools are not built into the image).
RUN make -C bpf \
    && npx node-gyp rebuild --directory native --nodedir="$(node -p "require('path').resolve(process.execPath, '../..')")" \
    && npx tsc -b src \
    && npm prune --omit=dev

# The runtime: Node.js, libbpf, iptables (nft and legacy: Debian's package has both) and
# iproute2; nothing of the build or of the test harness.
FROM ${RUNTIME_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends libbpf1 zlib1g iptables iproute2 libstdc++6 >/dev/null \
    && rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man
COPY --from=build /opt/node/bin/node /usr/local/bin/node
WORKDIR /opt/switchyard
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/bin ./bin
COPY --from=build /src/bpf/*.o ./bpf/
COPY --from=build /src/native/build/Release/switchyard_bpf.node ./native/build/Release/
# `switchyard maps …` in the agent's pod, and the kubectl plugin, as commands.
RUN ln -s /opt/switchyard/bin/switchyard.js /usr/local/bin/switchyard \
    && ln -s /opt/switchyard/bin/kubectl-switchyard.js /usr/local/bin/kubectl-switchyard
ENTRYPOINT ["node", "/opt/switchyard/bin/switchyard.js"]
