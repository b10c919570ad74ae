# switchyard agent image. Build: docker build -t switchyard:dev .
FROM node:20-bookworm AS build
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      clang llvm libbpf-dev libelf-dev zlib1g-dev make g++ python3 pkg-config >/dev/null
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY . .
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends libbpf1 libelf1 zlib1g >/dev/null \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/switchyard
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/bin ./bin
COPY --from=build /src/bpf/*.o ./bpf/
COPY --from=build /src/native/build/Release/switchyard_bpf.node ./native/build/Release/
ENTRYPOINT ["node", "/opt/switchyard/bin/switchyard.js"]
