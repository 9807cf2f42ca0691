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
 * A box whose script has an agent (struct fake_agent) plays a warm box
 * instead: a thread on the box's end of the stream speaks the agent
 * protocol (docs/agent-protocol.md, encoded with agentframe.h): R when it
 * starts, A for a claim C, o/X/D for an exec E (reading the code file from
 * the box's /sandbox mount), D for an interrupt I of a held exec, p for P.
 * It ends, as the real agent does, at the end of its input (exit 0), and
 * when the box is killed or released. Warm boxes get the same stream from
 * box_channel ("channel" in the log); a box made with spec.handover is
 * handed its directory by box_hand_over ("handover"), which records where
 * the directory is, as a mount would show it to the box.
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

/*
 * How a box's scripted agent behaves. Exec numbers count that box's execs
 * from 1; 0 means never.
 */
struct fake_agent {
	bool no_ready;    /* never sends R: a pool box that never gets ready */
	unsigned die_at;  /* ends its stream at that exec, after output */
	unsigned lose_at; /* the kernel dies at that exec (D "lost"), then R */
	unsigned hang_at; /* holds that exec until an I for it arrives */
	bool ready_with_done; /* lose_at's R goes out with its D, at once */
};

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
	const struct fake_agent *agent; /* a warm box (borrowed), or NULL */
};

struct fake_backend {
	struct backend base;
	struct backend_impl impl; /* a copy: tests may change features */
	pthread_mutex_t mu;
	struct fake_script next;
	char log[8192];        /* the calls, space-separated */
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
	int boxes;         /* boxes alive (created and not released) */
	int created;       /* boxes made: box ids are fake0, fake1, ... */
	char kind[16];     /* the last spec's sandbox.kind label, or "" */
	char data[256];    /* its /data mount's source, or "" */
	bool data_follows; /* that mount follows host mounts */
	char handover[64]; /* its spec.handover (a pool box's "/data"), or "" */
	char handed[256];  /* the directory box_hand_over got last, or "" */
	/*
	 * box_intact finds the hand-over place of every box not handed its
	 * directory yet damaged (as if something on the host removed it).
	 */
	bool handover_broken;
	bool main_is_init; /* its main process is the box's init */
	/* agents: the code file the last exec named, as it found it */
	char exec_code[256];
	unsigned execs; /* execs of all boxes */
};

/* Prepares fb (caller memory) with features BACKEND_CAN_*; destroy with
 * backend_destroy(&fb->base), which finishes it. */
void fake_backend_init(struct fake_backend *fb, unsigned features);
/* Sets what the next box created does (copied; strings borrowed). */
void fake_backend_next(struct fake_backend *fb, const struct fake_script *s);
/* Empties the log of calls. */
void fake_backend_clear(struct fake_backend *fb);
/* How many times word is in the log. */
unsigned fake_backend_count(struct fake_backend *fb, const char *word);
/* Whether the log has word a before word b (both present). */
bool fake_backend_before(struct fake_backend *fb, const char *a, const char *b);

#endif
