/* SPDX-License-Identifier: MIT */
/*
 * fake_backend: an execution backend (backend.h) for unit tests that stands
 * in for the engine. Each box plays the script set with fake_backend_next:
 * when started it writes the script's output to its stream and ends (or
 * hangs until killed), and inspect tells the script's exit code and OOM
 * flag. The backend records every call as a word in a log ("create attach
 * start stream_close signal:KILL wait inspect release"), the last spec's
 * image, command, mounts and the code file it found under /sandbox, and
 * the stdin it was sent, for the test to check. The stream is a real
 * socket pair, so poll(2) in the code under test works as with Docker.
 *
 * Threads: every call takes the backend's mutex; box_signal may come from
 * another thread. Test code only; keep it in tests/unit.
 */
#ifndef MCPSD_TEST_FAKE_BACKEND_H
#define MCPSD_TEST_FAKE_BACKEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

/* What the next box does. */
struct fake_script {
	const char *out;     /* written as stdout at start, or NULL */
	size_t out_len;      /* 0: strlen(out) */
	const char *err;     /* written as stderr at start, or NULL */
	int exit_code;       /* when it ends by itself */
	bool oom;            /* inspect says the OOM killer struck */
	bool hang;           /* never ends by itself: only a KILL ends it */
	int create_rc;       /* box_create fails with this (< 0), or 0 */
	const char *err_msg; /* box_create's message on failure */
};

struct fake_backend {
	struct backend base;
	struct backend_impl impl; /* a copy: tests may change features */
	pthread_mutex_t mu;
	struct fake_script next;
	char log[2048];        /* the calls, space-separated */
	char image[128];       /* the last spec's image */
	char cmd0[128];        /* its argv[0] */
	char workdir[64];      /* its working directory */
	char sandbox[256];     /* its /sandbox mount's source */
	bool sandbox_ro;       /* that mount is read-only */
	const char *code_name; /* the code file's name, set by the test */
	char code[256];        /* that file under /sandbox at create */
	char stdin_path[64];   /* the spec's stdin_path, or "" */
	char stdin_got[256];   /* what the stream's stdin received */
	size_t stdin_len;
	bool stdin_closed;
	int boxes; /* boxes alive (created and not released) */
};

/* Prepares fb (caller memory) with features BACKEND_CAN_*; destroy with
 * backend_destroy(&fb->base), which finishes it. */
void fake_backend_init(struct fake_backend *fb, unsigned features);
/* Sets what the next box created does (copied; strings borrowed). */
void fake_backend_next(struct fake_backend *fb, const struct fake_script *s);
/* Empties the log of calls. */
void fake_backend_clear(struct fake_backend *fb);
/* Whether the log has word a before word b (both present). */
bool fake_backend_before(struct fake_backend *fb, const char *a, const char *b);

#endif
