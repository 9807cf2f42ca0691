/* SPDX-License-Identifier: MIT */
/*
 * workspace_fork: a conversation started as a copy of another one of the
 * same tenant (run_code's fork_from, docs/sessions.md): the files of the
 * source workspace, its saved interpreter state (.mcp/state) included,
 * copied into the new one. Regular files and directories are copied;
 * links, FIFOs, sockets and devices are skipped and counted, never
 * followed. Each file is written like an upload (workspace_write_file:
 * beneath the workspace, owned by the sandbox user, within its quota).
 * Both handles must be locked by the caller; thread-safe otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fstree.h"
#include "util/errmsg.h"
#include "workspace/files.h"
#include "workspace/workspace.h"

struct fork_walk {
	struct workspace *dst;
	const struct config *cfg;
	int srcfd;
	struct workspace_fork_stats *stats;
	char *err;
	size_t errlen;
};

/* Whether the workspace holds nothing at all. */
static int fork_empty_visit(void *data, const struct fstree_entry *e)
{
	(void)e;
	*(bool *)data = false;
	return 1;
}

static int fork_visit(void *data, const struct fstree_entry *e)
{
	struct fork_walk *w = data;
	char *buf = NULL;
	size_t len = 0;
	int rc, dfd;

	if (S_ISDIR(e->st->st_mode)) {
		dfd = fstree_mkdirs(workspace_dirfd(w->dst), e->rel,
		                    (uid_t)w->cfg->sandbox_uid,
		                    (gid_t)w->cfg->sandbox_gid);
		if (dfd < 0)
			return errmsg_fail(dfd, w->err, w->errlen,
			                   "cannot create the directory %s in "
			                   "the new conversation: %s",
			                   e->rel, strerror(-dfd));
		close(dfd);
		return 0;
	}
	if (!S_ISREG(e->st->st_mode)) {
		w->stats->skipped++;
		return 0;
	}
	rc = files_read_any(w->srcfd, e->rel, w->cfg->workspace_quota_bytes,
	                    &buf, &len, NULL);
	if (rc == -ENOENT) {
		w->stats
		    ->skipped++; /* gone or replaced since the walk saw it */
		return 0;
	}
	if (rc < 0)
		return errmsg_fail(rc, w->err, w->errlen,
		                   "cannot read %s of the conversation to fork "
		                   "from: %s",
		                   e->rel, strerror(-rc));
	rc = workspace_write_file(w->dst, e->rel, buf, len, false, w->err,
	                          w->errlen);
	free(buf);
	if (rc < 0)
		return rc;
	w->stats->files++;
	w->stats->bytes += len;
	return 0;
}

int workspace_fork(struct workspace *dst, struct workspace *src,
                   struct workspace_fork_stats *stats, char *err, size_t errlen)
{
	const struct config *cfg = workspace_mgr_config(workspace_mgr_of(dst));
	struct fork_walk w = {dst,   cfg, workspace_dirfd(src),
	                      stats, err, errlen};
	bool empty = true;
	int rc;

	memset(stats, 0, sizeof(*stats));
	rc = fstree_walk(workspace_dirfd(dst), "", 1, fork_empty_visit, &empty,
	                 NULL);
	if (rc < 0)
		return errmsg_fail(rc, err, errlen,
		                   "cannot look into the new conversation's "
		                   "files: %s",
		                   strerror(-rc));
	if (!empty)
		return errmsg_fail(-ENOTEMPTY, err, errlen,
		                   "fork_from starts a new conversation, and "
		                   "this one has files already: leave out "
		                   "conversationId (a new one is made) or pass "
		                   "an unused one");
	rc = fstree_walk(workspace_dirfd(src), "",
	                 (size_t)cfg->workspace_max_files + 1000, fork_visit,
	                 &w, NULL);
	if (rc < 0 && (!err[0]))
		errmsg_set(err, errlen,
		           "cannot copy the conversation's files: %s",
		           strerror(-rc));
	return rc;
}
