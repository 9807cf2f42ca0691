/* SPDX-License-Identifier: MIT */
/*
 * workspace_internal: what the files of the workspace module share with one
 * another and with nothing else: the manager, its per-workspace entries and
 * the handle, and the helpers one file calls in another. workspace.c owns
 * names, entries, creating and mounting a workspace, and handles;
 * workspace_mgr.c owns the manager's lifetime (start-up: the root lock, the
 * quota mode probe, recovery; shutdown), the retention sweep and health;
 * workspace_io.c works through the public API only.
 *
 * Locking: mgr->mu guards the entry list, every entry's fields and
 * mgr->count; slow work on an entry happens outside it with the entry
 * marked busy (see workspace.c). Functions below say when they need it.
 */
#ifndef MCPSD_WORKSPACE_INTERNAL_H
#define MCPSD_WORKSPACE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "config.h"
#include "workspace.h"

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
	unsigned sweep_gen;
	long long idle_since; /* monotonic ms when refs last fell to 0 */
};

struct workspace_mgr {
	const struct config *cfg;
	EVP_MAC *mac;
	unsigned char key[32];
	bool loop; /* the quota mode in effect */
	int rootfd, wsfd, metafd, imgfd, lockfd;
	int replica_lockfd; /* .lock.<MCP_REPLICA_NAME>, or -1 */
	char ws_path[300], img_path[300];
	pthread_mutex_t mu;
	pthread_cond_t cond; /* entry state changed; CLOCK_MONOTONIC */
	struct ws_entry *entries;
	unsigned count; /* complete workspaces on disk, plus reservations */
	unsigned sweep_gen;
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
 * The entry of name, created (not ready, no references) if there is none;
 * NULL when out of memory. Called with the lock held.
 */
struct ws_entry *workspace_entry_get(struct workspace_mgr *m, const char *name);

/* Frees an entry nobody needs. Called with the lock held. */
void workspace_entry_maybe_free(struct workspace_mgr *m, struct ws_entry *e);

/* Whether the marker (meta/<name>) or the image (images/<name>.img) exists. */
bool workspace_marker_exists(struct workspace_mgr *m, const char *name);
bool workspace_image_exists(struct workspace_mgr *m, const char *name);

/* The mount point (or directory) and the image path of name. */
void workspace_paths(struct workspace_mgr *m, const char *name, char *dir,
                     size_t dirlen, char *img, size_t imglen);

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
