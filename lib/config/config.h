/* SPDX-License-Identifier: MIT */
/*
 * config: the daemon's settings, read once at start-up from the process
 * environment and an optional .env file (the environment wins), validated,
 * and then read-only for the life of the process. Every setting is described
 * in one table in config.c, which also produces --help and --check-config
 * output and (config_doc.c) the reference documents, so a setting cannot be
 * documented in one place and parsed in another. Not thread-safe while
 * loading; immutable afterwards.
 */
#ifndef MCPSD_CONFIG_H
#define MCPSD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util/log.h"

#define CONFIG_TOKEN_DIGEST_LEN 32
#define CONFIG_SECRET_MAX 128

struct config_token {
	char *tenant; /* owned; [a-z0-9_.-]{1,64} */
	unsigned char digest[CONFIG_TOKEN_DIGEST_LEN]; /* SHA-256(token) */
	char fingerprint[13];
};

/* The longest MCP_REPLICA_NAME: a prefix of every session id. */
#define MCP_REPLICA_NAME_MAX 12

struct netaddr_cidr;

struct config {
	/* HTTP front */
	char *http_addr;   /* as configured, e.g. ":8080" */
	char *listen_host; /* "" for all interfaces */
	unsigned listen_port;
	bool listen_loopback;
	char *public_base_url;  /* no trailing slash */
	char *files_base_url;   /* no trailing slash; = public_base_url */
	char **allowed_origins; /* NULL-terminated; "*" entries allowed */
	char **allowed_hosts;   /* NULL-terminated; empty means unchecked */
	bool auth_none;
	struct config_token *tokens;
	size_t n_tokens;
	size_t max_body_bytes;
	size_t max_header_bytes;
	unsigned max_json_depth;
	unsigned max_connections;
	unsigned header_timeout_s;
	unsigned body_timeout_s;
	unsigned idle_timeout_s;
	unsigned session_idle_s;
	unsigned max_sessions_per_tenant;
	unsigned keepalive_s;
	unsigned max_inflight_per_session;
	unsigned task_retention_s;
	size_t task_result_max_bytes;
	unsigned task_max_per_tenant;
	size_t task_result_bytes_per_tenant;
	char *instance_name;
	char *replica_name; /* "" when this is the only daemon */
	unsigned replica_lease_s;
	unsigned conversation_lease_s; /* replicas on their own engines */
	enum log_level log_level;
	char *log_format;

	/* the engine (Docker, or a Swarm's manager) */
	char *docker_host;
	/* DOCKER_TIMEOUT_SECONDS: one engine call, whichever backend */
	unsigned engine_timeout_s;
	char *runtime; /* "" = engine default */

	/* one run */
	unsigned memory_mb;
	double cpus;
	unsigned memory_max_mb; /* a caller's memory_mb at most */
	double cpus_max;        /* a caller's cpus at most */
	char *cgroup_fs;        /* "" = usage not measured */
	unsigned timeout_s;
	unsigned max_timeout_s;
	unsigned pids_limit;
	unsigned tmp_mb;
	unsigned nofile;
	unsigned fsize_mb;
	unsigned sandbox_uid;
	unsigned sandbox_gid;
	bool allow_network;
	size_t code_max_bytes;
	size_t stdin_max_bytes;
	size_t inputs_max_bytes;
	size_t env_max_bytes;
	size_t output_inline_bytes;
	size_t output_max_bytes;
	unsigned output_saved_files;
	size_t output_saved_bytes;

	/* many runs */
	unsigned max_concurrent;
	unsigned queue_length;
	unsigned reap_interval_s;
	unsigned reap_grace_s;
	unsigned runs_sweep_s; /* 0: derived from the timeouts */

	/* per-tenant limits */
	unsigned tenant_max_running;
	unsigned tenant_max_queued;
	unsigned tenant_cpu_s;
	unsigned tenant_cpu_window_s;
	unsigned discovery_interval_s;

	/* warm sessions */
	bool warm;
	unsigned warm_idle_s;
	unsigned warm_max_s;
	char *warm_channel; /* "auto", "socket" or "attach" */
	unsigned warm_max;
	unsigned warm_memory_mb;
	unsigned pool_size;
	char **pool_languages; /* NULL-terminated; "*" for all */
	char *pool_preload;
	unsigned interrupt_grace_ms;
	bool state_save;       /* durable sessions: save and restore state */
	unsigned state_max_mb; /* cap of one saved state */
	unsigned state_keep;   /* saves kept for rewind */

	/* packages on demand (packages.h) */
	bool packages;
	char *pip_index;    /* URL of a PEP 503 simple index */
	char *npm_registry; /* URL of an npm registry */
	char *cran_repos;   /* CRAN-like repository URLs, comma-separated */
#define CONFIG_CRAN_REPOS_MAX 8
	unsigned packages_timeout_s;
	unsigned packages_max_mb; /* 0: only the workspace quota */
	char *packages_network;   /* Docker network of the installers */
	char *packages_ca_file;   /* "" = the image's CAs */
	/* egress (lib/egress): checked by egress_settings_check */
	char *egress_allow;   /* patterns */
	char *egress_tenants; /* tenant=patterns;... */
	char *egress_ports;   /* "80,443" */
	char *egress_private; /* CIDRs */
	char *egress_hosts;   /* name=ip ... */
	char *egress_image;
	char *egress_proxy_network;
	char *egress_subnet; /* IPv4 CIDR, /8 to /24 */

	/* workspaces and files */
	char *sandbox_root;
	char *sandbox_host_path;
	unsigned char file_secret[CONFIG_SECRET_MAX];
	size_t file_secret_len;
	bool file_secret_ephemeral;
	char *quota_mode; /* "auto", "loop", "none" */
	size_t workspace_quota_bytes;
	unsigned workspace_max_files;
	unsigned max_workspaces;
	unsigned workspace_max_per_tenant; /* 0: max_workspaces / tenants */
	unsigned workspace_create_burst;
	unsigned workspace_create_per_hour; /* 0: no rate limit */
	unsigned retention_hours;
	unsigned retention_seconds; /* as set; 0: retention_hours */
	unsigned retention_s;       /* derived: the one in effect */
	size_t upload_max_bytes;
	size_t inline_image_max_bytes;

	/* OAuth authorization server and the durable store */
	bool oauth;                   /* OAUTH_ENABLED resolved */
	const char *oauth_why;        /* static: how auto decided */
	char *oauth_issuer;           /* the origin of PUBLIC_BASE_URL */
	char **oauth_redirect_hosts;  /* https hosts; NULL-terminated */
	bool oauth_redirect_loopback; /* 'loopback' was listed */
	unsigned oauth_access_ttl_s;
	unsigned oauth_refresh_ttl_days;
	unsigned oauth_code_ttl_s;
	unsigned oauth_max_clients;
	bool oauth_cimd;          /* Client ID Metadata Documents */
	char **oauth_cimd_hosts;  /* hosts documents may come from; "*" */
	char *oauth_cimd_ca_file; /* "" = the system's CAs */
	char *store_path;
	char *store_url; /* "" = SQLite at store_path; else a postgresql URL */
	char *stdio_tenant; /* --stdio: the tenant of the local client */

	/* more than one host, and metrics */
	/* a name in backend.h's registry, checked by backend_configure */
	char *backend;
	char *swarm_constraints; /* ';'-separated placement constraints */
	unsigned swarm_queue_timeout_s;
	char *metrics_token; /* "": loopback peers only */

	/* usage and audit */
	char *operator_token; /* /admin/...; "": loopback peers only */
	bool audit_keep_code;
	unsigned audit_retention_days; /* 0: forever */
	unsigned usage_retention_days; /* 0: forever */

	/* proxies in front (MCP_TRUSTED_PROXIES), and what they imply */
	char *trusted_proxies_raw; /* as given */
	char
	    *trusted_proxy_header; /* auto, cf-connecting-ip, x-forwarded-for */
	/* parsed: n_trusted_proxies ranges; NULL when none */
	struct netaddr_cidr *trusted_proxies;
	size_t n_trusted_proxies;
	/* PUBLIC_BASE_URL was set, to a host that is not loopback */
	bool public_remote;

	char **dotenv_; /* private: KEY=VALUE pairs read from the .env file */
};

/*
 * Loads and validates. dotenv_path may be NULL (no file) or a path that need
 * not exist. The choice of backend and each backend's own settings are
 * checked after this by backend_configure (backend.h). On failure returns
 * -EINVAL with a message for a person in err: the variable, what is wrong with
 * its value, and an example of a good one. The config must be released with
 * config_finish whatever the result.
 */
__attribute__((warn_unused_result)) int config_load(struct config *cfg,
                                                    const char *dotenv_path,
                                                    char *err, size_t errlen);

/* Frees what config_load allocated. NULL-safe. */
void config_finish(struct config *cfg);

/* Writes the effective configuration, secrets masked, as KEY=value lines. */
void config_print(const struct config *cfg, FILE *out);

/* Writes the table of settings (name, default, meaning) for --help. */
void config_print_help(FILE *out);

/*
 * Writes a document generated from the table of settings: format
 * "markdown" is docs/configuration.md, "env" is .env.example, "readme" is
 * the README's table of the settings set on day one (between its BEGIN and
 * END comments). Returns 0; -EINVAL for an unknown format, -EIO when out
 * could not be written, each with a message in err.
 */
__attribute__((warn_unused_result)) int
config_print_reference(const char *format, FILE *out, char *err, size_t errlen);

/*
 * Parses a byte size: a whole number with an optional suffix k, m, g (powers
 * of 1024, case-insensitive, optional "b"/"ib"). Returns 0 or -EINVAL.
 */
__attribute__((warn_unused_result)) int config_parse_bytes(const char *s,
                                                           size_t *out);

/*
 * Splits "host:port", "[v6]:port" or ":port". Returns 0 or -EINVAL; *host is
 * allocated (caller frees), "" for all interfaces.
 */
__attribute__((warn_unused_result)) int
config_parse_addr(const char *s, char **host, unsigned *port);

#endif
