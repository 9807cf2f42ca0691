/* SPDX-License-Identifier: MIT */
/*
 * config: one table describes every setting (name, type, default, limits,
 * an example and a sentence of help). Here: the table, the raw value of a
 * setting (the environment, then the .env file, then the default), the
 * parsing of the table's rows into struct config and the helpers the
 * derived settings use (config_derive.c), freeing and printing. Loading
 * (config_load.c) reads the .env file, parses the table, then derives the
 * settings that depend on others. Messages
 * name the variable, say what is wrong and give a good example, because the
 * person reading them is setting up a server, not debugging this file.
 */
#include "config/config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "store/store.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/num.h"

static const struct setting settings[] = {
    SECTION("HTTP front",
            "Where the daemon listens, who may call it, and the limits of "
            "each connection, request, MCP session and task."),
    {"MCP_HTTP_ADDR", SET_STR, ":8080", OFF(http_addr), 0, 0, "127.0.0.1:8080",
     "Address to listen on: host:port; ':8080' means every interface"},
    {"PUBLIC_BASE_URL", SET_STR, "", DERIVED, 0, 0,
     "https://sandbox.example.com",
     "URL clients reach this server at; file links are built from it "
     "(default http://127.0.0.1:<port>)"},
    {"FILES_BASE_URL", SET_STR, "", DERIVED, 0, 0, "https://files.example.com",
     "Separate origin for /files/ links (default: PUBLIC_BASE_URL)"},
    {"MCP_AUTH", SET_STR, "bearer", DERIVED, 0, 0, "bearer",
     "'bearer' (tokens required) or 'none' (local testing only; binds to "
     "loopback)"},
    {"MCP_API_TOKEN", SET_SECRET, "", DERIVED, 0, 0, "$(openssl rand -hex 32)",
     "Bearer token of the tenant named 'default' (at least 16 "
     "characters; clients send \"Authorization: Bearer <token>\"); "
     "every client and chat that uses it is that one tenant, its "
     "conversations told apart only by conversationId"},
    {"MCP_API_TOKENS", SET_SECRET, "", DERIVED, 0, 0,
     "alice:<token>,bob:<token>",
     "More tokens, each with the tenant name that keeps its conversations "
     "apart"},
    {"MCP_ALLOWED_ORIGINS", SET_STR, "", DERIVED, 0, 0,
     "https://claude.ai,http://localhost:6274",
     "Browser origins allowed to call the endpoint ('*' for any); "
     "requests without Origin are always allowed (default: the public "
     "URLs' origins, plus localhost when bound to loopback)"},
    {"MCP_ALLOWED_HOSTS", SET_STR, "", DERIVED, 0, 0,
     "sandbox.example.com,localhost",
     "Host header values accepted (default: checked only when bound to "
     "loopback: localhost, 127.0.0.1, [::1] and the public URL's host)"},
    {"MCP_TRUSTED_PROXIES", SET_STR, "", OFF(trusted_proxies_raw), 0, 0,
     "127.0.0.1,::1",
     "Proxies in front of the server (addresses or CIDR ranges, "
     "comma-separated) whose CF-Connecting-IP or X-Forwarded-For header "
     "names the client, for per-client limits (default: none; headers "
     "are ignored and every limit keys on the socket peer). A proxy on "
     "this host: 127.0.0.1,::1; cloudflared in "
     "deploy/docker-compose.cloudflare.yml: the stack network's subnet"},
    {"MCP_TRUSTED_PROXY_HEADER", SET_STR, "auto", OFF(trusted_proxy_header), 0,
     0, "x-forwarded-for",
     "Which header of a trusted proxy names the client: auto "
     "(CF-Connecting-IP, else X-Forwarded-For), cf-connecting-ip or "
     "x-forwarded-for (use x-forwarded-for behind a proxy that passes a "
     "client's own CF-Connecting-IP through: nginx, Caddy and HAProxy "
     "do unless told not to)"},
    {"MCP_MAX_BODY_BYTES", SET_BYTES, "16m", OFF(max_body_bytes), 1024,
     1024.0 * 1024 * 1024, "16m", "Largest request body accepted"},
    {"MCP_MAX_HEADER_BYTES", SET_BYTES, "16k", OFF(max_header_bytes), 2048,
     1024 * 1024, "16k", "Largest total size of request headers"},
    {"MCP_MAX_JSON_DEPTH", SET_UINT, "64", OFF(max_json_depth), 4, 1000, "64",
     "Deepest JSON nesting accepted in a request"},
    {"MCP_MAX_CONNECTIONS", SET_UINT, "512", OFF(max_connections), 8, 65536,
     "512", "Simultaneous HTTP connections"},
    {"MCP_HEADER_TIMEOUT_SECONDS", SET_UINT, "10", OFF(header_timeout_s), 1,
     3600, "10",
     "Time a client has to send a request's headers (slowloris guard; "
     "also the idle keep-alive limit)"},
    {"MCP_BODY_TIMEOUT_SECONDS", SET_UINT, "60", OFF(body_timeout_s), 1, 3600,
     "60", "Time a client has to send a request body"},
    {"MCP_IDLE_TIMEOUT_SECONDS", SET_UINT, "120", OFF(idle_timeout_s), 5, 86400,
     "120",
     "A connection that moves no byte for this long is closed (streams "
     "send keep-alives well within it)"},
    {"MCP_SESSION_IDLE_SECONDS", SET_UINT, "3600", OFF(session_idle_s), 10,
     7 * 86400, "3600",
     "An MCP session with no request and no open stream for this long is "
     "forgotten (clients then re-initialize)"},
    {"MCP_MAX_SESSIONS_PER_TENANT", SET_UINT, "256",
     OFF(max_sessions_per_tenant), 1, 1000000, "256",
     "Live MCP sessions one tenant may hold"},
    {"MCP_MAX_INFLIGHT_PER_SESSION", SET_UINT, "32",
     OFF(max_inflight_per_session), 1, 10000, "32",
     "Requests one session may have running at once"},
    {"MCP_KEEPALIVE_SECONDS", SET_UINT, "15", OFF(keepalive_s), 1, 300, "15",
     "Interval of ': keepalive' comments on quiet event streams"},
    {"MCP_TASK_RETENTION_SECONDS", SET_UINT, "86400", OFF(task_retention_s), 5,
     31536000, "86400",
     "A finished task's result stays readable (tasks/get, across "
     "restarts) for this long after the task ends (tasks: protocol "
     "2026-07-28; at least 5; rows past it are deleted within a minute)"},
    {"MCP_TASK_RESULT_MAX_BYTES", SET_BYTES, "8m", OFF(task_result_max_bytes),
     4096, 256.0 * 1024 * 1024, "8m",
     "Largest result a task keeps (a larger one fails the task)"},
    {"MCP_TASK_MAX_PER_TENANT", SET_UINT, "1000", OFF(task_max_per_tenant), 1,
     1000000, "1000",
     "Tasks one token keeps at once (the oldest ended ones make room)"},
    {"MCP_TASK_RESULT_BYTES_PER_TENANT", SET_BYTES, "128m",
     OFF(task_result_bytes_per_tenant), 4096, 1024.0 * 1024 * 1024 * 1024,
     "128m",
     "Bytes of ended tasks' results one token keeps in the store (the "
     "oldest ended ones make room; at least MCP_TASK_RESULT_MAX_BYTES)"},
    {"MCP_REPLICA_NAME", SET_STR, "", OFF(replica_name), 0, 0, "r1",
     "This daemon's name among replicas behind one load balancer: its "
     "session ids start with it (r1.), so the balancer routes a session "
     "to its owner; replicas share SANDBOX_ROOT and a PostgreSQL "
     "STORE_URL (empty: the only daemon; see docs/deployment.md, "
     "Several daemon replicas)"},
    {"MCP_REPLICA_LEASE_SECONDS", SET_UINT, "30", OFF(replica_lease_s), 3, 3600,
     "30",
     "Replicas: one not seen in the store for this long is taken as gone, "
     "and its running tasks are marked failed"},
    {"MCP_CONVERSATION_LEASE_SECONDS", SET_UINT, "2", OFF(conversation_lease_s),
     1, 3600, "3",
     "Replicas that each drive their own node's engine (a daemon per "
     "node, SANDBOX_BACKEND=docker): how long a conversation stays with a "
     "replica that stopped renewing its lease (killed, cut off) before "
     "another one restores it from its last save; renewed every third of "
     "it (docs/deployment.md, Warm sessions on every node)"},
    {"MCP_INSTANCE_NAME", SET_STR, "", DERIVED, 0, 0, "sandbox-1",
     "Name of this daemon on the Docker engine; its containers carry it "
     "(default: the host name and a hash of SANDBOX_ROOT)"},
    {"MCP_LOG_LEVEL", SET_STR, "info", DERIVED, 0, 0, "info",
     "debug, info, warn or error"},
    {"MCP_LOG_FORMAT", SET_STR, "text", OFF(log_format), 0, 0, "json",
     "Log line format: text or json"},

    SECTION("Docker engine", "The engine the sandboxes run on."),
    {"DOCKER_HOST", SET_STR, "unix:///var/run/docker.sock", OFF(docker_host), 0,
     0, "unix:///var/run/docker.sock",
     "Docker Engine API socket (unix:// only)"},
    {"DOCKER_TIMEOUT_SECONDS", SET_UINT, "30", OFF(engine_timeout_s), 1, 600,
     "30", "Limit for one Docker API call (runs are limited separately)"},
    {"SANDBOX_RUNTIME", SET_STR, "", OFF(runtime), 0, 0, "runsc",
     "OCI runtime for sandboxes (empty: the engine's default, runc)"},

    SECTION("One run",
            "The limits of one run of code: a caller may ask for less, "
            "and for more only up to the *_MAX settings."),
    {"SANDBOX_MEMORY_MB", SET_UINT, "256", OFF(memory_mb), 16, 65536, "256",
     "Memory limit of a run, swap included"},
    {"SANDBOX_CPUS", SET_DOUBLE, "0.5", OFF(cpus), 0.01, 64, "0.5",
     "CPU limit of a run, in cores"},
    {"SANDBOX_MEMORY_MAX_MB", SET_UINT, "0", OFF(memory_max_mb), 0, 65536,
     "1024",
     "Largest memory_mb a caller may ask for in one run (0: the larger of "
     "1024 and SANDBOX_MEMORY_MB)"},
    {"SANDBOX_CPUS_MAX", SET_DOUBLE, "0", OFF(cpus_max), 0, 64, "1",
     "Largest cpus a caller may ask for in one run (0: the larger of 1 and "
     "SANDBOX_CPUS)"},
    {"SANDBOX_CGROUP_FS", SET_STR, "/sys/fs/cgroup", OFF(cgroup_fs), 0, 0,
     "/sys/fs/cgroup",
     "The engine host's cgroup filesystem as this daemon sees it, to read a "
     "one-off run's peak memory and CPU time (empty: not measured)"},
    {"SANDBOX_TIMEOUT_SECONDS", SET_UINT, "30", OFF(timeout_s), 1, 86400, "30",
     "Time limit of a run when the caller gives none"},
    {"SANDBOX_MAX_TIMEOUT_SECONDS", SET_UINT, "300", OFF(max_timeout_s), 1,
     86400, "300", "Largest time limit a caller may ask for"},
    {"SANDBOX_PIDS_LIMIT", SET_UINT, "128", OFF(pids_limit), 8, 100000, "128",
     "Processes and threads a run may have at once"},
    {"SANDBOX_TMP_MB", SET_UINT, "64", OFF(tmp_mb), 1, 65536, "64",
     "Size of the writable /tmp of a run (counts against its memory)"},
    {"SANDBOX_NOFILE", SET_UINT, "1024", OFF(nofile), 16, 1048576, "1024",
     "Open files a process of a run may have"},
    {"SANDBOX_FSIZE_MB", SET_UINT, "128", OFF(fsize_mb), 1, 1048576, "128",
     "Largest single file a run may write"},
    {"SANDBOX_UID", SET_UINT, "64321", OFF(sandbox_uid), 1, 4294967294.0,
     "64321", "User id code runs as; choose one no host user has"},
    {"SANDBOX_GID", SET_UINT, "64321", OFF(sandbox_gid), 1, 4294967294.0,
     "64321", "Group id code runs as"},
    {"SANDBOX_ALLOW_NETWORK", SET_BOOL, "false", OFF(allow_network), 0, 0,
     "false", "Whether a caller may ask for network access in a run"},
    {"SANDBOX_MAX_CODE_BYTES", SET_BYTES, "512k", OFF(code_max_bytes), 1024,
     64.0 * 1024 * 1024, "512k", "Largest code a run accepts"},
    {"SANDBOX_MAX_STDIN_BYTES", SET_BYTES, "1m", OFF(stdin_max_bytes), 0,
     1024.0 * 1024 * 1024, "1m", "Largest stdin a run accepts"},
    {"SANDBOX_MAX_INPUTS_BYTES", SET_BYTES, "1m", OFF(inputs_max_bytes), 0,
     64.0 * 1024 * 1024, "1m", "Largest inputs object (as JSON) a run accepts"},
    {"SANDBOX_MAX_ENV_BYTES", SET_BYTES, "64k", OFF(env_max_bytes), 0,
     16.0 * 1024 * 1024, "64k",
     "Largest total size of the environment a caller passes"},
    {"SANDBOX_OUTPUT_INLINE_BYTES", SET_BYTES, "32k", OFF(output_inline_bytes),
     256, 16.0 * 1024 * 1024, "32k",
     "Output returned inline per stream; longer output keeps head and tail "
     "and is saved whole to the workspace"},
    {"SANDBOX_OUTPUT_MAX_BYTES", SET_BYTES, "16m", OFF(output_max_bytes), 1024,
     4096.0 * 1024 * 1024, "16m",
     "Output past which a run is stopped (status output_limit)"},
    {"SANDBOX_OUTPUT_SAVED_FILES", SET_UINT, "10", OFF(output_saved_files), 0,
     100000, "10",
     "Whole outputs kept saved in a conversation's /data/.mcp; older ones "
     "are deleted first (0: never save)"},
    {"SANDBOX_OUTPUT_SAVED_BYTES", SET_BYTES, "32m", OFF(output_saved_bytes), 0,
     4096.0 * 1024 * 1024, "32m",
     "Bytes the saved whole outputs of a conversation may take (at most "
     "half its quota); older ones are deleted to make room"},

    SECTION("Many runs",
            "How many runs happen at once, how many wait, and what one "
            "tenant may take of them."),
    {"SANDBOX_MAX_CONCURRENT", SET_UINT, "0", OFF(max_concurrent), 0, 4096, "4",
     "Runs at once (0: two per CPU core)"},
    {"SANDBOX_QUEUE_LENGTH", SET_UINT, "32", OFF(queue_length), 0, 100000, "32",
     "Runs that may wait for a slot; past it callers are told to retry"},
    {"TENANT_MAX_RUNNING", SET_UINT, "0", OFF(tenant_max_running), 0, 4096, "2",
     "Runs one tenant may have at once; more wait in the queue (0: only "
     "SANDBOX_MAX_CONCURRENT)"},
    {"TENANT_MAX_QUEUED", SET_UINT, "8", OFF(tenant_max_queued), 0, 100000, "8",
     "Runs one tenant may have waiting; past it the tenant gets status "
     "rate_limited (0, or more than SANDBOX_QUEUE_LENGTH - 1: "
     "SANDBOX_QUEUE_LENGTH - 1, leaving room for others)"},
    {"TENANT_CPU_SECONDS", SET_UINT, "0", OFF(tenant_cpu_s), 0, 1000000000,
     "3600",
     "CPU seconds one tenant's runs may use per window; past it runs get "
     "status rate_limited until the window ends (0: unlimited, and "
     "nothing is counted: a limit set later counts from then)"},
    {"TENANT_CPU_WINDOW_SECONDS", SET_UINT, "3600", OFF(tenant_cpu_window_s), 1,
     31536000, "3600",
     "Length of the CPU budget's window; windows are fixed, counted from "
     "the Unix epoch"},
    {"SANDBOX_REAP_INTERVAL_SECONDS", SET_UINT, "30", OFF(reap_interval_s), 1,
     3600, "30", "How often leftover containers are looked for"},
    {"SANDBOX_REAP_GRACE_SECONDS", SET_UINT, "60", OFF(reap_grace_s), 5, 86400,
     "60",
     "How long past its deadline label another daemon's leftover container "
     "or Swarm service is kept before any daemon removes it (room for the "
     "hosts' clocks to differ; a daemon's own earlier boot's are removed at "
     "once)"},
    {"SANDBOX_RUNS_SWEEP_SECONDS", SET_UINT, "0", OFF(runs_sweep_s), 0,
     31536000, "720",
     "Code directories under SANDBOX_ROOT/runs that no run or warm box "
     "holds are removed once this old (0: SANDBOX_MAX_TIMEOUT_SECONDS + "
     "4 x DOCKER_TIMEOUT_SECONDS + 300)"},
    {"SANDBOX_DISCOVERY_INTERVAL_SECONDS", SET_UINT, "30",
     OFF(discovery_interval_s), 1, 3600, "30",
     "How often runner images are rediscovered"},

    SECTION("Warm sessions",
            "Boxes kept running between runs, so that state (variables, "
            "imports) survives and a run starts fast; see "
            "docs/sessions.md."),
    {"SANDBOX_WARM", SET_BOOL, "true", OFF(warm), 0, 0, "true",
     "Keep a warm session (a running box; for Python a live interpreter) "
     "per conversation and language between runs"},
    {"SANDBOX_WARM_IDLE_SECONDS", SET_UINT, "600", OFF(warm_idle_s), 1, 604800,
     "600", "A warm session unused this long ends (state lost)"},
    {"SANDBOX_WARM_MAX_SECONDS", SET_UINT, "7200", OFF(warm_max_s), 10, 2592000,
     "7200",
     "Every warm session (and pool box) ends after this long, used or not "
     "(state lost; at least 10)"},
    {"SANDBOX_WARM_CHANNEL", SET_STR, "auto", OFF(warm_channel), 0, 0, "auto",
     "How the daemon talks to a warm box's agent: 'socket' (a unix socket "
     "the agent connects to once, through a private read-only mount: no "
     "Docker engine on the way, so calls are not slowed by a busy engine "
     "and survive its restart with live-restore), 'attach' (the "
     "container's attach stream through the engine) or 'auto' (socket "
     "unless the engine remaps user ids, is rootless or is Docker "
     "Desktop's)"},
    {"SANDBOX_WARM_MAX", SET_UINT, "32", OFF(warm_max), 0, 100000, "32",
     "Warm boxes (sessions and pool) on this host at once; idle ones are "
     "evicted least recently used first, with fair shares: a tenant "
     "holding this / the tenants with sessions evicts only its own"},
    {"SANDBOX_WARM_MEMORY_MB", SET_UINT, "0", OFF(warm_memory_mb), 0, 100000000,
     "8192",
     "Memory limits of all warm boxes together (0: half of the host's "
     "memory)"},
    {"SANDBOX_POOL_SIZE", SET_UINT, "1", OFF(pool_size), 0, 64, "1",
     "Pre-started boxes per pooled language, so a conversation's first "
     "run is warm too (0: no pool)"},
    {"SANDBOX_POOL_LANGUAGES", SET_STR, "python,typescript,bash,*", DERIVED, 0,
     0, "python,bash",
     "Languages that get a pool, filled in this order after a start (* "
     "for every other installed one: an idle pool "
     "box of a language other than Python holds about 3.5 MiB of host "
     "memory, Python's with SANDBOX_POOL_PRELOAD about 70 MiB, nine "
     "languages about 95 MiB; each box's memory limit counts against "
     "SANDBOX_WARM_MEMORY_MB, and pool boxes are evicted first)"},
    {"SANDBOX_POOL_PRELOAD", SET_STR, "numpy,pandas,matplotlib.pyplot",
     OFF(pool_preload), 0, 0, "numpy,pandas",
     "Python modules a pooled Python box imports before it is claimed"},
    {"SANDBOX_INTERRUPT_GRACE_MS", SET_UINT, "2000", OFF(interrupt_grace_ms),
     100, 600000, "2000",
     "After a timeout or cancel: how long an interrupted run may take to "
     "stop before it (and, for Python, its state) is killed; a cancel "
     "waits at most 750 ms, so a cancelled run is gone within 2 s"},
    {"SANDBOX_STATE", SET_BOOL, "true", OFF(state_save), 0, 0, "true",
     "Durable sessions: a warm Python session saves its namespace after "
     "every run in the conversation's workspace (/data/.mcp/state, counted "
     "against its quota), and a new box of the conversation loads it: the "
     "state outlives idle expiry, eviction, restarts and image updates"},
    {"SANDBOX_STATE_MAX_MB", SET_UINT, "256", OFF(state_max_mb), 1, 1048576,
     "256",
     "A saved Python state larger than this is not saved (the run's "
     "result says so; the previous save stays)"},
    {"SANDBOX_STATE_KEEP", SET_UINT, "5", OFF(state_keep), 1, 100, "5",
     "Saved states kept per conversation: run_code's rewind_to can return "
     "to the state after any of the last this many runs"},

    SECTION("Packages on demand",
            "pip, npm and CRAN installs into a conversation's cache by an "
            "installer that alone has network."),
    {"SANDBOX_PACKAGES", SET_BOOL, "true", OFF(packages), 0, 0, "true",
     "Whether run_code may install packages (pip for Python, npm for "
     "TypeScript, CRAN for R) into a conversation's cache; the installer "
     "alone has network, the code never"},
    {"SANDBOX_PACKAGES_PIP_INDEX", SET_STR, "https://pypi.org/simple",
     OFF(pip_index), 0, 0, "https://pypi.example.com/simple",
     "Python package index (PEP 503 simple API) pip installs from; an "
     "http:// index is trusted as given"},
    {"SANDBOX_PACKAGES_NPM_REGISTRY", SET_STR, "https://registry.npmjs.org/",
     OFF(npm_registry), 0, 0, "https://npm.example.com/",
     "npm registry TypeScript/JavaScript packages come from"},
    {"SANDBOX_PACKAGES_CRAN_REPOS", SET_STR, "https://cloud.r-project.org",
     OFF(cran_repos), 0, 0,
     "https://cran.example.com,https://r-universe.example.com",
     "CRAN-like repositories R packages come from (source packages, "
     "src/contrib/PACKAGES), comma-separated (the newest version among "
     "them wins); only packages without C/C++/Fortran code install, as the "
     "R runner has no compilers"},
    {"SANDBOX_PACKAGES_TIMEOUT_SECONDS", SET_UINT, "120",
     OFF(packages_timeout_s), 5, 3600, "120",
     "Time limit of one installation (on top of the run's own)"},
    {"SANDBOX_PACKAGES_MAX_MB", SET_UINT, "0", OFF(packages_max_mb), 0, 1048576,
     "50",
     "Size one conversation's package cache of a language may reach; "
     "past it the call fails (pip's cache is emptied, npm's left as it "
     "was; 0: only WORKSPACE_QUOTA_MB, which the cache counts against)"},
    {"SANDBOX_PACKAGES_NETWORK", SET_STR, "bridge", OFF(packages_network), 0, 0,
     "bridge",
     "Docker network the installers run on (e.g. one that reaches only "
     "your mirror), or 'egress': through the egress proxy, to the index's "
     "or registry's host and port only (recommended)"},
    {"SANDBOX_PACKAGES_CA_FILE", SET_STR, "", OFF(packages_ca_file), 0, 0,
     "/etc/ssl/certs/ca-certificates.crt",
     "PEM bundle of the certificate authorities the installers trust "
     "(give the whole bundle, e.g. behind a TLS-inspecting proxy; "
     "default: the image's own)"},

    SECTION("Egress",
            "Runs with network reach the outside only through a Squid "
            "proxy that allows the names of an allow-list; see "
            "docs/security.md (Egress)."),
    {"SANDBOX_EGRESS_ALLOW", SET_STR, "", OFF(egress_allow), 0, 0,
     "pypi.org *.github.com api.example.com:8443",
     "Domain patterns every tenant's runs with network may reach (a "
     "leading *. for the names below one, :port for another port than "
     "SANDBOX_EGRESS_PORTS); a run's network: [...] narrows it, "
     "network: true takes it whole; empty: nothing"},
    {"SANDBOX_EGRESS_TENANTS", SET_STR, "", OFF(egress_tenants), 0, 0,
     "team-a=api.example.com *.github.com;team-b=pypi.org",
     "Allow-lists of tenants that get their own instead of "
     "SANDBOX_EGRESS_ALLOW: tenant=patterns, separated by ';'"},
    {"SANDBOX_EGRESS_PORTS", SET_STR, "80,443", OFF(egress_ports), 0, 0,
     "80,443", "Ports a pattern without :port allows"},
    {"SANDBOX_EGRESS_PRIVATE", SET_STR, "", OFF(egress_private), 0, 0,
     "10.1.2.3/32",
     "Private, loopback and link-local addresses (CIDR) that allowed "
     "names may still resolve to (e.g. a mirror on your network); all "
     "others, 169.254.169.254 included, are refused whatever the name"},
    {"SANDBOX_EGRESS_HOSTS", SET_STR, "", OFF(egress_hosts), 0, 0,
     "mirror.internal=10.1.2.3",
     "Names the proxy resolves itself (name=IPv4, separated by spaces "
     "or commas), before DNS"},
    {"SANDBOX_EGRESS_IMAGE", SET_STR, "mcp-sandboxd/egress:latest",
     OFF(egress_image), 0, 0, "mcp-sandboxd/egress:latest",
     "Image of the egress proxy (Squid; runners/build.sh --egress)"},
    {"SANDBOX_EGRESS_PROXY_NETWORK", SET_STR, "bridge",
     OFF(egress_proxy_network), 0, 0, "bridge",
     "Docker network with a route out that the proxy is on"},
    {"SANDBOX_EGRESS_SUBNET", SET_STR, "10.213.0.0/16", OFF(egress_subnet), 0,
     0, "10.213.0.0/16",
     "IPv4 range cut into a /29 network for each run with network (one "
     "box and the proxy on it); use one the host's networks do not"},

    SECTION("Workspaces and files",
            "Each conversation's /data directory, its quota and "
            "retention, and the links to its files; see "
            "docs/workspaces.md."),
    {"SANDBOX_ROOT", SET_STR, "/var/lib/mcp-sandboxd", OFF(sandbox_root), 0, 0,
     "/var/lib/mcp-sandboxd",
     "Directory holding workspaces, as this daemon sees it"},
    {"SANDBOX_HOST_PATH", SET_STR, "", DERIVED, 0, 0, "/srv/mcp-sandboxd",
     "The same directory as the Docker host sees it (differs when the "
     "daemon runs in a container; default: SANDBOX_ROOT)"},
    {"FILE_SECRET", SET_SECRET, "", DERIVED, 0, 0, "$(openssl rand -hex 32)",
     "Key for workspace names and file URLs (at least 32 characters); "
     "changing it orphans existing workspaces and links"},
    {"WORKSPACE_QUOTA_MODE", SET_STR, "auto", OFF(quota_mode), 0, 0, "loop",
     "loop (a filesystem image per workspace: hard quota), none (watched "
     "during each run, which is stopped about a second past the quota), "
     "auto (loop when possible)"},
    {"WORKSPACE_QUOTA_MB", SET_UINT, "100", DERIVED, 1, 1048576, "100",
     "Megabytes one conversation's workspace may hold"},
    {"WORKSPACE_MAX_FILES", SET_UINT, "10000", OFF(workspace_max_files), 16,
     100000000, "10000", "Files one conversation's workspace may hold"},
    {"WORKSPACE_MAX_COUNT", SET_UINT, "1000", OFF(max_workspaces), 1, 10000000,
     "1000", "Workspaces kept at once"},
    {"WORKSPACE_MAX_PER_TENANT", SET_UINT, "0", OFF(workspace_max_per_tenant),
     0, 10000000, "200",
     "Workspaces one tenant keeps at once (0: WORKSPACE_MAX_COUNT divided "
     "by the number of tenants, so none can crowd out another; see "
     "docs/workspaces.md)"},
    {"WORKSPACE_CREATE_BURST", SET_UINT, "30", OFF(workspace_create_burst), 1,
     1000000, "30",
     "New workspaces one tenant may create in a burst before "
     "WORKSPACE_CREATE_PER_HOUR paces it"},
    {"WORKSPACE_CREATE_PER_HOUR", SET_UINT, "300",
     OFF(workspace_create_per_hour), 0, 3600000, "300",
     "New workspaces one tenant may create an hour after its burst (0: no "
     "rate limit)"},
    {"WORKSPACE_RETENTION_HOURS", SET_UINT, "168", OFF(retention_hours), 1,
     876000, "168", "Idle workspaces are deleted after this long"},
    {"WORKSPACE_RETENTION_SECONDS", SET_UINT, "0", OFF(retention_seconds), 0,
     3153600000.0, "3600",
     "Idle workspaces are deleted after this many seconds instead of "
     "WORKSPACE_RETENTION_HOURS (0: use the hours); the sweep runs every "
     "minute, or every half of this when shorter"},
    {"UPLOAD_MAX_BYTES", SET_BYTES, "10m", OFF(upload_max_bytes), 1024,
     1024.0 * 1024 * 1024, "10m", "Largest file upload_file accepts"},
    {"INLINE_IMAGE_MAX_BYTES", SET_BYTES, "512k", OFF(inline_image_max_bytes),
     0, 64.0 * 1024 * 1024, "512k",
     "Largest image a run result shows inline (larger ones are linked)"},

    SECTION("OAuth and the durable store",
            "The OAuth 2.1 authorization server that claude.ai connectors "
            "use (docs/oauth.md), and where durable state is kept."),
    {"OAUTH_ENABLED", SET_STR, "auto", DERIVED, 0, 0, "true",
     "OAuth 2.1 authorization server for claude.ai and other OAuth clients: "
     "auto (on when PUBLIC_BASE_URL is https without a path), true or "
     "false; true with an http PUBLIC_BASE_URL is accepted on loopback "
     "only (testing)"},
    {"OAUTH_REDIRECT_HOSTS", SET_STR, "claude.ai,claude.com,loopback", DERIVED,
     0, 0, "claude.ai,claude.com,loopback,app.example.com",
     "Hosts an OAuth client may send the browser back to (https); "
     "'loopback' allows 127.0.0.1, [::1] and localhost on any port"},
    {"OAUTH_ACCESS_TOKEN_TTL_SECONDS", SET_UINT, "3600",
     OFF(oauth_access_ttl_s), 600, 86400, "3600",
     "Lifetime of an OAuth access token (clients refresh up to 5 minutes "
     "early, so at least 600)"},
    {"OAUTH_REFRESH_TOKEN_TTL_DAYS", SET_UINT, "30",
     OFF(oauth_refresh_ttl_days), 1, 3650, "30",
     "An OAuth refresh token unused for this long expires (each use "
     "replaces it with a new one)"},
    {"OAUTH_CODE_TTL_SECONDS", SET_UINT, "60", OFF(oauth_code_ttl_s), 5, 600,
     "60", "Lifetime of an OAuth authorization code"},
    {"OAUTH_MAX_CLIENTS", SET_UINT, "10000", OFF(oauth_max_clients), 10,
     10000000, "10000",
     "Registered OAuth clients kept at most (unused ones are pruned "
     "first)"},
    {"OAUTH_CIMD", SET_BOOL, "false", OFF(oauth_cimd), 0, 0, "true",
     "Accept Client ID Metadata Documents (client ids that are https URLs "
     "the daemon fetches; needs outbound HTTPS)"},
    {"OAUTH_CIMD_HOSTS", SET_STR, "claude.ai,claude.com", DERIVED, 0, 0,
     "claude.ai,claude.com",
     "Hosts client metadata documents may be fetched from ('*': any "
     "public host)"},
    {"OAUTH_CIMD_CA_FILE", SET_STR, "", OFF(oauth_cimd_ca_file), 0, 0,
     "/etc/ssl/certs/ca-certificates.crt",
     "CA bundle for fetching client metadata documents (default: the "
     "system's)"},
    {"STDIO_TENANT", SET_STR, "default", OFF(stdio_tenant), 0, 0, "desktop",
     "Tenant of the client served by --stdio: its conversations are the "
     "ones of the HTTP token with this tenant name"},
    {"STORE_PATH", SET_STR, "", DERIVED, 0, 0, "/var/lib/mcp-sandboxd/state.db",
     "SQLite file of the daemon's durable state: OAuth clients and grants, "
     "task records, per-tenant CPU usage (default: SANDBOX_ROOT/state.db)"},
    {"STORE_URL", SET_STR, "", DERIVED, 0, 0,
     "postgresql://mcpsd@db.internal/mcpsd",
     "PostgreSQL database for the durable state instead of STORE_PATH, "
     "shared by several replicas: a postgresql:// or postgres:// URL "
     "(password in it, or in PGPASSFILE or PGPASSWORD; see "
     "docs/operations.md, Store)"},
    SECTION("More than one host, and metrics",
            "Docker Swarm and replicas (docs/deployment.md), and the "
            "/metrics endpoint."),
    {"SANDBOX_BACKEND", SET_STR, "docker", OFF(backend), 0, 0, "swarm",
     "Where runs happen: docker (the engine at DOCKER_HOST) or swarm "
     "(services of the Swarm whose manager is DOCKER_HOST; every run "
     "one-off; see docs/deployment.md)"},
    {"SWARM_CONSTRAINTS", SET_STR, "node.labels.mcp-sandboxd.sandbox==true",
     OFF(swarm_constraints), 0, 0, "node.labels.mcp-sandboxd.sandbox==true",
     "Placement constraints of run services, separated by ';': only nodes "
     "configured as sandbox nodes. At least one is required with the "
     "swarm backend (none would place code on any node, managers "
     "included), each under 256 characters"},
    {"SWARM_QUEUE_TIMEOUT_SECONDS", SET_UINT, "600", OFF(swarm_queue_timeout_s),
     1, 86400, "600",
     "How long a run may wait for room in the Swarm (its reservations) "
     "or for an earlier run of its conversation before it fails"},
    {"METRICS_TOKEN", SET_SECRET, "", OFF(metrics_token), 0, 0,
     "$(openssl rand -hex 32)",
     "Bearer token for GET /metrics (empty: /metrics answers loopback "
     "clients only, and nobody when PUBLIC_BASE_URL is a public URL: "
     "behind a proxy or tunnel every request is a loopback one)"},
    SECTION("Usage and audit",
            "What each tenant and conversation used, and the hash-chained "
            "record of every run (docs/operations.md, Usage and audit)."),
    {"OPERATOR_TOKEN", SET_SECRET, "", OFF(operator_token), 0, 0,
     "$(openssl rand -hex 32)",
     "Bearer token for the operator's endpoints /admin/usage and "
     "/admin/audit (at least 16 characters; empty: they answer loopback "
     "clients only, and nobody when PUBLIC_BASE_URL is a public URL). The "
     "API tokens and METRICS_TOKEN do not open them"},
    {"AUDIT_KEEP_CODE", SET_BOOL, "false", OFF(audit_keep_code), 0, 0, "true",
     "Keep each run's code in the audit trail, not only its SHA-256 (the "
     "store grows by the code of every run)"},
    {"AUDIT_RETENTION_DAYS", SET_UINT, "365", OFF(audit_retention_days), 0,
     36500, "365",
     "Audit entries older than this are deleted (hourly), leaving a "
     "checkpoint entry so the rest still verifies (0: keep them all)"},
    {"USAGE_RETENTION_DAYS", SET_UINT, "400", OFF(usage_retention_days), 0,
     36500, "400",
     "Hourly usage counters older than this are deleted (0: keep them "
     "all)"},
};

#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

const struct setting *config_settings(size_t *n)
{
	*n = N_SETTINGS;
	return settings;
}

const struct setting *config_setting_find(const char *name)
{
	for (size_t i = 0; i < N_SETTINGS; i++) {
		if (settings[i].type != SET_SECTION &&
		    strcmp(settings[i].name, name) == 0)
			return &settings[i];
	}
	return NULL;
}

static const char *lookup(const struct config *cfg, const char *name)
{
	const char *v = getenv(name);
	size_t nl = strlen(name);

	if (v)
		return v;
	for (char **p = cfg->dotenv_; p && *p; p++) {
		if (strncmp(*p, name, nl) == 0 && (*p)[nl] == '=')
			return *p + nl + 1;
	}
	return NULL;
}

/* The raw value of a setting: the environment, the .env file or default. */
const char *config_raw(const struct config *cfg, const char *name)
{
	const char *v = lookup(cfg, name);
	const struct setting *s;

	if (v)
		return v;
	s = config_setting_find(name);
	return s ? s->def : "";
}

int config_parse_bytes(const char *s, size_t *out)
{
	const char *end;
	uint64_t v, mul = 1;

	*out = 0;
	end = num_scan_u64(s, UINT64_MAX, &v);
	if (!end)
		return -EINVAL;
	if (*end) {
		char c = (char)tolower((unsigned char)*end);

		if (c == 'k')
			mul = 1024ULL;
		else if (c == 'm')
			mul = 1024ULL * 1024;
		else if (c == 'g')
			mul = 1024ULL * 1024 * 1024;
		else if (c != 'b')
			return -EINVAL;
		if (c != 'b') {
			end++;
			if (tolower((unsigned char)*end) == 'i')
				end++;
		}
		if (tolower((unsigned char)*end) == 'b')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (v > (uint64_t)SIZE_MAX / mul)
		return -EINVAL;
	*out = (size_t)(v * mul);
	return 0;
}

int config_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off", ""};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

int config_parse_addr(const char *s, char **host, unsigned *port)
{
	const char *colon;
	uint64_t p = 0;
	size_t hl;

	*host = NULL;
	*port = 0;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || rb[1] != ':')
			return -EINVAL;
		colon = rb + 1;
		hl = (size_t)(rb - s - 1);
		s++;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - s);
		if (memchr(s, ':', hl))
			return -EINVAL; /* bare IPv6 needs brackets */
	}
	if (num_u64(colon + 1, 65535, &p) < 0 || p < 1)
		return -EINVAL;
	*host = strndup(s, hl);
	if (!*host)
		return -ENOMEM;
	*port = (unsigned)p;
	return 0;
}

bool config_host_is_loopback(const char *h)
{
	return strcmp(h, "127.0.0.1") == 0 || strncmp(h, "127.", 4) == 0 ||
	       strcmp(h, "::1") == 0 || strcasecmp(h, "localhost") == 0;
}

int config_set_str(char **dst, const char *v)
{
	char *p = strdup(v);

	if (!p)
		return -ENOMEM;
	free(*dst);
	*dst = p;
	return 0;
}

int config_parse_table(struct config *cfg, char *err, size_t errlen)
{
	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *s = &settings[i];
		const char *v = config_raw(cfg, s->name);
		char *base = (char *)cfg;

		if (s->off == DERIVED)
			continue;
		switch (s->type) {
		case SET_STR:
		case SET_SECRET:
			if (config_set_str((char **)(void *)(base + s->off),
			                   v) < 0)
				return -ENOMEM;
			break;
		case SET_BOOL:
			if (config_parse_bool(
			        v, (bool *)(void *)(base + s->off)) < 0)
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "%s='%s' is not a boolean; use "
				    "true or false, e.g. %s=%s",
				    s->name, v, s->name, s->example);
			break;
		case SET_UINT: {
			uint64_t u = 0;

			if (num_u64(v, (uint64_t)s->max, &u) < 0 ||
			    (double)u < s->min)
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "%s='%s' must be a whole number "
				    "from %.0f to %.0f, e.g. %s=%s",
				    s->name, v, s->min, s->max, s->name,
				    s->example);
			*(unsigned *)(void *)(base + s->off) = (unsigned)u;
			break;
		}
		case SET_BYTES: {
			size_t b;

			if (config_parse_bytes(v, &b) < 0 ||
			    (double)b < s->min || (double)b > s->max)
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "%s='%s' must be a size from %.0f "
				    "to %.0f bytes, with an optional "
				    "k/m/g suffix, e.g. %s=%s",
				    s->name, v, s->min, s->max, s->name,
				    s->example);
			*(size_t *)(void *)(base + s->off) = b;
			break;
		}
		case SET_DOUBLE: {
			double d = 0;

			if (num_double(v, s->min, s->max, &d) < 0)
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "%s='%s' must be a number from %g "
				    "to %g, e.g. %s=%s",
				    s->name, v, s->min, s->max, s->name,
				    s->example);
			*(double *)(void *)(base + s->off) = d;
			break;
		}
		case SET_SECTION:
			break;
		}
	}
	return 0;
}

/* Validates an absolute http(s) URL without path, query or fragment. */
int config_check_base_url(const char *name, char **url, char *err,
                          size_t errlen)
{
	char *u = *url;
	size_t n = strlen(u);
	const char *rest;

	while (n && u[n - 1] == '/')
		u[--n] = '\0';
	if (strncmp(u, "http://", 7) == 0)
		rest = u + 7;
	else if (strncmp(u, "https://", 8) == 0)
		rest = u + 8;
	else
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "%s='%s' must start with http:// or https://, e.g. "
		    "%s=https://sandbox.example.com",
		    name, u, name);
	if (!*rest || strpbrk(rest, "?#@ \t\r\n\"<>\\"))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "%s='%s' must be a base URL without query, "
		                   "fragment, credentials or spaces, e.g. "
		                   "%s=https://sandbox.example.com",
		                   name, u, name);
	return 0;
}

/* Splits a comma-separated list into a NULL-terminated array. */
int config_split_list(const char *s, char ***out)
{
	size_t n = 0, cap = 4;
	char **v = calloc(cap + 1, sizeof(*v));
	const char *p = s;

	if (!v)
		return -ENOMEM;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		while (len && isspace((unsigned char)*p)) {
			p++;
			len--;
		}
		while (len && isspace((unsigned char)p[len - 1]))
			len--;
		if (len) {
			if (n == cap) {
				char **nv =
				    realloc(v, (cap * 2 + 1) * sizeof(*v));
				if (!nv)
					goto nomem;
				v = nv;
				cap *= 2;
			}
			v[n] = strndup(p, len);
			if (!v[n])
				goto nomem;
			v[++n] = NULL;
		}
		if (!e)
			break;
		p = e + 1;
	}
	*out = v;
	return 0;
nomem:
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	return -ENOMEM;
}

int config_list_add(char ***list, const char *item)
{
	size_t n = 0;
	char **v;

	while ((*list)[n]) {
		if (strcasecmp((*list)[n], item) == 0)
			return 0;
		n++;
	}
	v = realloc(*list, (n + 2) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	*list = v;
	v[n] = strdup(item);
	if (!v[n])
		return -ENOMEM;
	v[n + 1] = NULL;
	return 0;
}

size_t config_strlen_list(char **v)
{
	size_t n = 0;

	while (v[n])
		n++;
	return n;
}

static void free_list(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* The origin (scheme://host[:port]) and host[:port] of a base URL. */
void config_url_parts(const char *url, char *origin, size_t olen,
                      char *hostport, size_t hlen)
{
	const char *h;

	if (!url)
		url = "";
	h = strstr(url, "://");
	snprintf(origin, olen, "%s", url);
	h = h ? h + 3 : url;
	snprintf(hostport, hlen, "%.*s", (int)strcspn(h, "/"), h);
}

void config_finish(struct config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *s = &settings[i];

		if (s->off != DERIVED &&
		    (s->type == SET_STR || s->type == SET_SECRET))
			free(*(char **)(void *)((char *)cfg + s->off));
	}
	free(cfg->listen_host);
	free(cfg->public_base_url);
	free(cfg->files_base_url);
	free(cfg->instance_name);
	free(cfg->sandbox_host_path);
	free_list(cfg->allowed_origins);
	free_list(cfg->allowed_hosts);
	free(cfg->trusted_proxies);
	free_list(cfg->pool_languages);
	free(cfg->oauth_issuer);
	free_list(cfg->oauth_redirect_hosts);
	free_list(cfg->oauth_cimd_hosts);
	free(cfg->store_path);
	free(cfg->store_url);
	for (size_t i = 0; i < cfg->n_tokens; i++)
		free(cfg->tokens[i].tenant);
	free(cfg->tokens);
	free_list(cfg->dotenv_);
	OPENSSL_cleanse(cfg->file_secret, sizeof(cfg->file_secret));
	memset(cfg, 0, sizeof(*cfg));
}

static void print_list(FILE *out, const char *name, char **v)
{
	fprintf(out, "%s=", name);
	for (size_t i = 0; v && v[i]; i++)
		fprintf(out, "%s%s", i ? "," : "", v[i]);
	fputc('\n', out);
}

void config_print(const struct config *cfg, FILE *out)
{
	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *s = &settings[i];
		const char *name = s->name;
		const char *base = (const char *)cfg;

		if (s->off != DERIVED) {
			switch (s->type) {
			case SET_STR:
				fprintf(out, "%s=%s\n", name,
				        *(char *const *)(const void *)(base +
				                                       s->off));
				break;
			case SET_SECRET: { /* a fingerprint, as --help says */
				const char *v = *(
				    char *const *)(const void *)(base + s->off);
				char fp[13];

				if (v[0]) {
					log_fingerprint(v, strlen(v), fp);
					fprintf(out,
					        "%s=<set, fingerprint %s>\n",
					        name, fp);
				} else {
					fprintf(out, "%s=\n", name);
				}
				break;
			}
			case SET_BOOL:
				fprintf(
				    out, "%s=%s\n", name,
				    *(const bool *)(const void *)(base + s->off)
				        ? "true"
				        : "false");
				break;
			case SET_UINT:
				fprintf(
				    out, "%s=%u\n", name,
				    *(const unsigned *)(const void *)(base +
				                                      s->off));
				break;
			case SET_BYTES:
				fprintf(
				    out, "%s=%zu\n", name,
				    *(const size_t *)(const void *)(base +
				                                    s->off));
				break;
			case SET_DOUBLE:
				fprintf(
				    out, "%s=%g\n", name,
				    *(const double *)(const void *)(base +
				                                    s->off));
				break;
			case SET_SECTION:
				break;
			}
			continue;
		}
		if (strcmp(name, "PUBLIC_BASE_URL") == 0) {
			fprintf(out, "%s=%s\n", name, cfg->public_base_url);
		} else if (strcmp(name, "FILES_BASE_URL") == 0) {
			fprintf(out, "%s=%s\n", name, cfg->files_base_url);
		} else if (strcmp(name, "MCP_AUTH") == 0) {
			fprintf(out, "%s=%s\n", name,
			        cfg->auth_none ? "none" : "bearer");
		} else if (strcmp(name, "MCP_API_TOKEN") == 0) {
			fprintf(out, "%s=", name);
			for (size_t t = 0; t < cfg->n_tokens; t++) {
				if (strcmp(cfg->tokens[t].tenant, "default") ==
				    0) {
					fprintf(out, "<set, fingerprint %s>",
					        cfg->tokens[t].fingerprint);
					break;
				}
			}
			fputc('\n', out);
		} else if (strcmp(name, "MCP_API_TOKENS") == 0) {
			fprintf(out, "%s=", name);
			for (size_t t = 0; t < cfg->n_tokens; t++)
				fprintf(out, "%s%s:<fingerprint %s>",
				        t ? "," : "", cfg->tokens[t].tenant,
				        cfg->tokens[t].fingerprint);
			fputc('\n', out);
		} else if (strcmp(name, "MCP_ALLOWED_ORIGINS") == 0) {
			print_list(out, name, cfg->allowed_origins);
		} else if (strcmp(name, "MCP_ALLOWED_HOSTS") == 0) {
			print_list(out, name, cfg->allowed_hosts);
		} else if (strcmp(name, "SANDBOX_POOL_LANGUAGES") == 0) {
			print_list(out, name, cfg->pool_languages);
		} else if (strcmp(name, "MCP_INSTANCE_NAME") == 0) {
			fprintf(out, "%s=%s\n", name, cfg->instance_name);
		} else if (strcmp(name, "MCP_LOG_LEVEL") == 0) {
			static const char *const lv[] = {"debug", "info",
			                                 "warn", "error"};
			fprintf(out, "%s=%s\n", name, lv[cfg->log_level]);
		} else if (strcmp(name, "SANDBOX_HOST_PATH") == 0) {
			fprintf(out, "%s=%s\n", name, cfg->sandbox_host_path);
		} else if (strcmp(name, "FILE_SECRET") == 0) {
			char fp[13];

			log_fingerprint(cfg->file_secret, cfg->file_secret_len,
			                fp);
			fprintf(out, "%s=<%s, fingerprint %s>\n", name,
			        cfg->file_secret_ephemeral ? "ephemeral"
			                                   : "set",
			        fp);
		} else if (strcmp(name, "OAUTH_ENABLED") == 0) {
			fprintf(out, "%s=%s\n# (%s)\n", name,
			        cfg->oauth ? "true" : "false",
			        cfg->oauth_why ? cfg->oauth_why : "");
		} else if (strcmp(name, "OAUTH_REDIRECT_HOSTS") == 0) {
			print_list(out, name, cfg->oauth_redirect_hosts);
			if (cfg->oauth_redirect_loopback)
				fprintf(out, "# OAuth redirects to loopback "
				             "(any port) are allowed\n");
		} else if (strcmp(name, "OAUTH_CIMD_HOSTS") == 0) {
			print_list(out, name, cfg->oauth_cimd_hosts);
		} else if (strcmp(name, "STORE_PATH") == 0) {
			fprintf(out, "%s=%s\n", name, cfg->store_path);
		} else if (strcmp(name, "STORE_URL") == 0) {
			char red[1100];

			store_url_redact(cfg->store_url, red, sizeof(red));
			fprintf(out, "%s=%s\n", name, red);
		} else if (strcmp(name, "WORKSPACE_QUOTA_MB") == 0) {
			fprintf(out, "%s=%zu\n", name,
			        cfg->workspace_quota_bytes / (1024 * 1024));
		}
	}
	if (cfg->oauth)
		fprintf(out,
		        "# OAuth: issuer %s, protected resource %s/mcp, "
		        "metadata %s/.well-known/oauth-authorization-server\n",
		        cfg->oauth_issuer, cfg->public_base_url,
		        cfg->oauth_issuer);
	else
		fprintf(out, "# OAuth: off (static bearer tokens only)\n");
	fprintf(out, "# listening on %s:%u%s\n",
	        cfg->listen_host[0] ? cfg->listen_host : "*", cfg->listen_port,
	        cfg->listen_loopback ? " (loopback only)" : "");
}
