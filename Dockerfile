# SPDX-License-Identifier: MIT
# The mcp-sandboxd daemon. Two stages: a build stage with meson, ninja, gcc
# and the -dev packages, and a small runtime stage with only the shared
# libraries the binary links, e2fsprogs (mkfs.ext4 for loop-mode workspace
# quotas), util-linux (mount tools for an operator's debugging; the daemon
# itself uses the loop and mount system calls) and curl for the health check.
#
# Offline (this project's machines): the base is the local debootstrapped
# Debian 12 image that runners/build.sh --daemon-base makes (the runner
# images are Debian 13, mcp-sandboxd/base:trixie). With a registry:
#   docker build --build-arg BASE_IMAGE=debian:bookworm-slim -t mcp-sandboxd .
# The runner images are built separately (runners/build.sh, or
# docker-compose build); see docs/deployment.md.
#
# Why the image runs as root by default, and when it need not:
# - The daemon talks to the Docker socket. Whoever can use that socket can
#   start a privileged container with the host's / mounted, so the daemon is
#   root-equivalent on the host whatever user it runs as. A non-root user buys
#   little here, but it is possible: see the non-root variant below.
# - Loop-mode workspace quotas (WORKSPACE_QUOTA_MODE=loop or auto) need real
#   privileges inside the container: mount(2) and the loop ioctls need
#   CAP_SYS_ADMIN, the loop device nodes must be created (CAP_MKNOD, see
#   deploy/docker-entrypoint.sh), and the workspace images are formatted with
#   their root owned by SANDBOX_UID, which needs CAP_CHOWN. Those are
#   capabilities of uid 0: Docker does not give them to a non-root user.
#   Loop mode is the only hard bound on the bytes and files a run can write
#   (docs/workspaces.md), so root is the default.
# - Non-root variant (no hard quotas): run as the sandbox uid with the
#   socket's group, WORKSPACE_QUOTA_MODE=none, and a SANDBOX_ROOT that uid
#   owns, e.g.
#     docker run --user 64321:64321 \
#       --group-add "$(stat -c %g /var/run/docker.sock)" \
#       -e WORKSPACE_QUOTA_MODE=none ...
#   The daemon must share the sandbox uid in that variant: without CAP_CHOWN
#   it cannot hand a workspace directory to another uid, and runs must be able
#   to write their /data. docs/deployment.md has the compose form.
ARG BASE_IMAGE=mcp-sandboxd/base:bookworm

# ---------------------------------------------------------------- build
FROM ${BASE_IMAGE} AS build
RUN set -eu; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        meson ninja-build pkg-config gcc libc6-dev binutils \
        libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev libssl-dev \
        libsqlite3-dev libpq-dev; \
    rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY meson.build meson_options.txt ./
COPY cmd ./cmd
COPY lib ./lib
COPY tests ./tests
# Only the daemon is built (the test programs are configured, not compiled).
# -Dwerror=false: warnings are CI's business (tests/run.sh builds with
# -Werror); a deployment must not fail because a compiler at -O3 or a newer
# base image finds a new one.
RUN set -eu; \
    meson setup /build /src --buildtype=release -Dwerror=false \
        -Dfixtures=false >/dev/null; \
    ninja -C /build cmd/mcp-sandboxd; \
    strip /build/cmd/mcp-sandboxd; \
    /build/cmd/mcp-sandboxd --version

# ---------------------------------------------------------------- runtime
FROM ${BASE_IMAGE}
RUN set -eu; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        libmicrohttpd12 libcjson1 libcurl4 libssl3 libsqlite3-0 libpq5 \
        e2fsprogs util-linux ca-certificates curl; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log; \
    find / -xdev -type f -perm /6000 -exec chmod ug-s {} +; \
    install -d -m 0711 /var/lib/mcp-sandboxd; \
    install -d -m 0755 /etc/mcp-sandboxd

COPY --from=build /build/cmd/mcp-sandboxd /usr/local/bin/mcp-sandboxd
COPY deploy/docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
# Fails the build if a shared library is missing from this stage.
RUN chmod 0755 /usr/local/bin/docker-entrypoint.sh && mcp-sandboxd --version

LABEL org.opencontainers.image.title="mcp-sandboxd" \
      org.opencontainers.image.description="Remote MCP server that runs code in Docker sandboxes" \
      org.opencontainers.image.licenses="MIT"

# In a container the daemon listens on every interface of the container;
# publish the port on the host's loopback (docker-compose.yml does) or put a
# tunnel or reverse proxy in front. SANDBOX_ROOT must be bind-mounted from
# the host at the same path (see docs/deployment.md).
ENV MCP_HTTP_ADDR=:8080 \
    SANDBOX_ROOT=/var/lib/mcp-sandboxd
EXPOSE 8080
# The daemon also reads ./.env: an env file bind-mounted at
# /etc/mcp-sandboxd/.env is read with the daemon's own parser (compose passes
# settings as environment variables instead).
WORKDIR /etc/mcp-sandboxd

# Healthy means: HTTP answers, the Docker engine answers and at least one
# runner image was found ("status":"ok"; "degraded" otherwise). The port
# comes from MCP_HTTP_ADDR (host:port or :port).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD a="${MCP_HTTP_ADDR:-:8080}"; \
        curl -fsS --max-time 4 "http://127.0.0.1:${a##*:}/healthz" | grep -q '"status":"ok"'

# Root by default for loop-mode quotas: see the top of this file.
USER 0:0
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD []
