/* SPDX-License-Identifier: MIT */
/*
 * mcp_lock: the one lock of the mcp module and the work that waits for its
 * release. A locked section only does bookkeeping; what it must not do
 * while other sessions wait for the lock (run a cancel hook, which may talk
 * to the Docker engine, or free a session's or stream's events, megabytes
 * of text) it queues on the server, and mcp_unlock() does it on the same
 * thread right after releasing the lock. Thread-safety: the queues are
 * guarded by srv->lock and are empty whenever it is free, so each thread
 * does exactly the work its own section queued.
 */
#include "mcp/mcp_internal.h"

#include <pthread.h>

void mcp_lock(struct mcp_server *srv)
{
	pthread_mutex_lock(&srv->lock);
}

void mcp_unlock(struct mcp_server *srv)
{
	struct mcp_call *hooks = srv->later_hooks;
	struct session *sessions = srv->later_sessions;
	struct stream *streams = srv->later_streams;

	srv->later_hooks = NULL;
	srv->later_sessions = NULL;
	srv->later_streams = NULL;
	pthread_mutex_unlock(&srv->lock);
	if (hooks)
		mcp_call_run_hooks(srv, hooks);
	while (streams) {
		struct stream *next = streams->next;

		mcp_stream_free(streams);
		streams = next;
	}
	while (sessions) {
		struct session *next = sessions->next;

		mcp_session_free(sessions);
		sessions = next;
	}
}
