/* SPDX-License-Identifier: MIT */
/*
 * workspace_internal: what the files of the workspace module share with one
 * another and with nothing else: the manager, its per-workspace entries and
 * the handle, and the helpers one file calls in another. workspace.c owns
 * names, entries, creating and mounting a workspace, and handles;
 * workspace_mgr.c owns the manager's lifetime (start-up: the root lock, the
 * quota mode probe, recovery; shutdown), the retention sweep and health;
 * workspace_io.c works through the public API only; workspace_defer.c owns
 * the deferred writes.
 *
 * Locking: mgr->mu guards the entry list, every entry's fields and
 * mgr->count; slow work on an entry happens outside it with the entry
 * marked busy (see workspace.c). Functions below say when they need it.
 * workspace_tenant.c owns tenant fingerprints and per-tenant limits.
 */
#ifndef MCPSD_WORKSPACE_INTERNAL_H
#define MCPSD_WORKSPACE_INTERNAL_H

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "config/config.h"
#include "util/ratelimit.h"
#include "workspace/workspace.h"

/* A tenant's fingerprint: 32 hex characters of a keyed hash of its name. */
#define WS_TENANT_FP_LEN 32

struct ws_entry {
	struct ws_entry *next;
	char name[WORKSPACE_NAME_LEN + 1];
	unsigned refs;    /* open handles */
	unsigned waiters; /* threads waiting for busy to clear */
	bool busy;        /* prepared, unmounted or deleted outside the lock */
	bool ready;       /* exists, and is mounted when loop */
	bool loop;        /* an image-backed workspace */
	bool mounted;
	bool locked; /* the run lock */
	/*
	 * Writes of a run that answered before making them (the notebook's
	 * copy in /data): a new handle waits for them (workspace_settle).
	 */
	unsigned settling;
	/*
	 * A deferred write (workspace_defer.c): when it is due (mono_ms, 0:
	 * none pending; the entry is kept while one is), the conversation id
	 * it is for, and when the last one was done (0: never).
	 */
	long long defer_due;
	long long defer_last;
	char *defer_conv;
	unsigned defer_gen; /* the last pass over deferred writes that saw it */
	unsigned sweep_gen;
	long long idle_since; /* monotonic ms when refs last fell to 0 */
};

/* How many workspaces one tenant has (counted like mgr->count). */
struct ws_tenant {
	char fp[WS_TENANT_FP_LEN + 1];
	unsigned count;
};

struct workspace_mgr {
	const struct config *cfg;
	EVP_MAC *mac;
	unsigned char key[32];
	unsigned char tenant_key[32]; /* for tenant fingerprints */
	unsigned per_tenant_max;      /* WORKSPACE_MAX_PER_TENANT resolved */
	unsigned n_config_tenants;    /* distinct configured tenant names */
	struct ratelimit *create_rl;  /* creations per tenant, or NULL */
	bool loop;                    /* the quota mode in effect */
	/* workspace_job_spare (its lane's thread only): no new try before
	 * this mono_ms after a failure, and the seq of its temporary names */
	long long spare_retry_ms;
	unsigned long long spare_seq;
	int rootfd, wsfd, metafd, imgfd, lockfd;
	int privfd;         /* private/: per workspace, what code never sees */
	int replica_lockfd; /* .lock.<MCP_REPLICA_NAME>, or -1 */
	char ws_path[300], img_path[300];
	pthread_mutex_t mu;
	pthread_cond_t cond; /* entry state changed; CLOCK_MONOTONIC */
	struct ws_entry *entries;
	unsigned count; /* complete workspaces on disk, plus reservations */
	unsigned sweep_gen;
	/*
	 * The retention sweep's place (workspace_mgr.c): a run of the job
	 * that stopped at its budget resumes the walk of meta/ there, or the
	 * unmounting of idle images when sweep_unmounting. sweep_mu
	 * serializes runs of the sweep and guards these two.
	 */
	pthread_mutex_t sweep_mu;
	DIR *sweep_dir;
	bool sweep_unmounting;
	/*
	 * Workspaces per tenant (of count; those made before markers named
	 * their tenant count for nobody until their tenant opens them).
	 */
	struct ws_tenant *tenants;
	size_t n_tenants, cap_tenants;
	/* The deferred write (workspace_mgr_set_deferred); NULL: none. */
	workspace_deferred_fn defer_fn;
	void *defer_arg;
	unsigned defer_interval_ms;
	unsigned defer_gen; /* passes over the deferred writes */
};

struct workspace {
	struct workspace_mgr *mgr;
	struct ws_entry *e;
	int dirfd;
	bool locked;
	char *host_path;
	char *conv; /* NULL when opened by name */
};

/* Whether s is a workspace name: exactly 64 lowercase hex characters. */
bool workspace_is_name(const char *s);

/* The size of a loop image: the byte quota, at least 8 MB. */
uint64_t workspace_image_bytes(const struct config *cfg);

/*
 * The spare image (loop mode): formatted ahead by workspace_job_spare in
 * images/, renamed to a new workspace's image when one is created, so the
 * first call of a conversation does not wait for mkfs.ext4 (6 ms). Names
 * starting with WORKSPACE_SPARE_PREFIX are the spare and images being made
 * for it: start-up removes them all (the settings may have changed the
 * size), shutdown the spare.
 */
#define WORKSPACE_SPARE_IMAGE ".spare.img"
#define WORKSPACE_SPARE_PREFIX ".spare"
#define WORKSPACE_SPARE_RETRY_MS 60000u

/*
 * The entry of name, created (not ready, no references) if there is none;
 * NULL when out of memory. Called with the lock held.
 */
struct ws_entry *workspace_entry_get(struct workspace_mgr *m, const char *name);

/*
 * Frees an entry nobody needs (no handles, no waiters, nothing mounted,
 * locked or deferred: workspace_defer_holds). Called with the lock held.
 */
void workspace_entry_maybe_free(struct workspace_mgr *m, struct ws_entry *e);

/* The fingerprint of tenant (WS_TENANT_FP_LEN hex + NUL; "" on failure). */
void workspace_tenant_fp(const struct workspace_mgr *m, const char *tenant,
                         char out[WS_TENANT_FP_LEN + 1]);

/*
 * The tenant fingerprint a marker records into fp ("" for a marker from
 * before tenants were recorded, or an unreadable one). 0, or -ENOENT when
 * there is no marker.
 */
int workspace_marker_tenant(struct workspace_mgr *m, const char *name,
                            char fp[WS_TENANT_FP_LEN + 1]);

/* Writes fp into the marker open as fd (in place). 0 or a negative errno. */
int workspace_marker_write_tenant(int fd, const char *fp);

/*
 * Adds delta to the count of tenant fp ("" is nobody: nothing happens).
 * -ENOMEM when a new tenant cannot be recorded. Called with the lock held.
 */
int workspace_tenant_add(struct workspace_mgr *m, const char *fp, int delta);

/*
 * Whether tenant fp may create one more workspace now; if not, a message
 * for the model in err and -EDQUOT (at its cap) or -EAGAIN (too fast).
 * Takes a token of the creation rate when it may. Called with the lock
 * held.
 */
int workspace_tenant_may_create(struct workspace_mgr *m, const char *fp,
                                char *err, size_t errlen);

/*
 * Start-up: resolves the per-tenant cap and creates the rate limiter
 * (m->cfg and m->tenant_key set). -ENOMEM with err.
 */
int workspace_tenants_setup(struct workspace_mgr *m, char *err, size_t errlen);

/* Frees what workspace_tenants_setup and the counts hold. */
void workspace_tenants_finish(struct workspace_mgr *m);

/* Logs a warning when the workspaces allowed could outgrow the disk. */
void workspace_check_disk(struct workspace_mgr *m);

/* Whether the marker (meta/<name>) or the image (images/<name>.img) exists. */
bool workspace_marker_exists(struct workspace_mgr *m, const char *name);
bool workspace_image_exists(struct workspace_mgr *m, const char *name);

/* The mount point (or directory) and the image path of name. */
void workspace_paths(struct workspace_mgr *m, const char *name, char *dir,
                     size_t dirlen, char *img, size_t imglen);

/* Releases e's run lock, waking its waiters. Called with the lock held. */
void workspace_entry_unlock(struct workspace_mgr *m, struct ws_entry *e);

/* Drops the deferred write pending on e, if any. Called with the lock held. */
void workspace_defer_drop(struct ws_entry *e);

/*
 * Whether e must be kept for its deferred write: one is pending, or the
 * last was less than an interval ago (the next run's write waits for it);
 * workspace_job_deferred frees it after. Called with the lock held.
 */
bool workspace_defer_holds(const struct workspace_mgr *m,
                           const struct ws_entry *e);

/*
 * Removes a workspace's directory and, when loop, unmounts and deletes its
 * image; the marker stays. Best effort, no lock needed.
 */
void workspace_remove_data(struct workspace_mgr *m, const char *name,
                           bool loop);

/* The retention in effect as words for logs and messages ("168 hours",
 * "20 seconds") into buf. Returns buf. */
const char *workspace_retention_text(const struct config *cfg, char *buf,
                                     size_t n);

#endif
