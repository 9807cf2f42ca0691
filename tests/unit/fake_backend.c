/* SPDX-License-Identifier: MIT */
/*
 * fake_backend: see fake_backend.h. A box's stream is one end of a socket
 * pair; the box writes frames (which, length in two bytes, bytes) to the
 * other end, and the stream's pump takes them apart. A box with an agent
 * has a thread that owns the box's end while it runs; release joins it.
 */
#include "fake_backend.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run/warm/agentframe.h"
#include "util/mono.h"

struct fake_box {
	struct box base;
	struct fake_backend *fb;
	struct fake_script script;
	int box_end; /* the box's end of the stream, or -1 */
	int stream_end;
	bool started, running, killed;
	int exit_code;     /* when it ended by itself */
	char sandbox[256]; /* its /sandbox mount's source */
	bool handover;     /* made with spec.handover */
	bool handed;       /* box_hand_over gave it its directory */
	/* the agent's thread and what it keeps */
	pthread_t agent;
	bool agent_started;
	unsigned execs;
	uint64_t held; /* an exec held until its interrupt, or 0 */
	/* While corked, frames gather here and go out in one send. */
	bool corked;
	unsigned char cork[4096];
	size_t cork_len;
};

struct fake_stream {
	struct box_stream base;
	struct fake_box *box;
	int fd;
	unsigned char buf[70000];
	size_t len;
	bool eof;
};

static void fb_log(struct fake_backend *fb, const char *word)
{
	size_t n;

	pthread_mutex_lock(&fb->mu);
	n = strlen(fb->log);
	snprintf(fb->log + n, sizeof(fb->log) - n, "%s%s", n ? " " : "", word);
	pthread_mutex_unlock(&fb->mu);
}

static void fb_destroy(struct backend *be)
{
	struct fake_backend *fb = (struct fake_backend *)be;

	pthread_mutex_destroy(&fb->mu);
}

static int fb_images(struct backend *be, const char *label, cJSON **out,
                     char *err, size_t errlen)
{
	*out = cJSON_CreateArray();
	return *out ? 0 : -ENOMEM;
}

static int fb_reap(struct backend *be, char *err, size_t errlen)
{
	return 0;
}

static void fb_sweep_own(struct backend *be)
{
}

static bool fb_health(struct backend *be, cJSON *health)
{
	return true;
}

static int fb_ping(struct backend *be, char *err, size_t errlen)
{
	return 0;
}

/* Records what a test checks of the spec, the code file included. */
static void fb_note_spec(struct fake_backend *fb, const struct box_spec *sp)
{
	snprintf(fb->image, sizeof(fb->image), "%s", sp->image);
	snprintf(fb->cmd0, sizeof(fb->cmd0), "%s", sp->n_cmd ? sp->cmd[0] : "");
	snprintf(fb->workdir, sizeof(fb->workdir), "%s",
	         sp->workdir ? sp->workdir : "");
	snprintf(fb->stdin_path, sizeof(fb->stdin_path), "%s",
	         sp->stdin_path ? sp->stdin_path : "");
	fb->sandbox[0] = fb->code[0] = fb->kind[0] = fb->data[0] = '\0';
	snprintf(fb->handover, sizeof(fb->handover), "%s",
	         sp->handover ? sp->handover : "");
	fb->main_is_init = sp->main_is_init;
	for (size_t i = 0; i < sp->n_labels; i++)
		if (strcmp(sp->labels[i].key, "sandbox.kind") == 0)
			snprintf(fb->kind, sizeof(fb->kind), "%s",
			         sp->labels[i].value);
	for (size_t i = 0; i < sp->n_mounts; i++) {
		char path[512];
		FILE *f;

		if (strcmp(sp->mounts[i].target, "/data") == 0) {
			snprintf(fb->data, sizeof(fb->data), "%s",
			         sp->mounts[i].source);
			fb->data_follows = sp->mounts[i].follow_host_mounts;
		}
		if (strcmp(sp->mounts[i].target, "/sandbox") != 0)
			continue;
		snprintf(fb->sandbox, sizeof(fb->sandbox), "%s",
		         sp->mounts[i].source);
		fb->sandbox_ro = sp->mounts[i].read_only;
		snprintf(path, sizeof(path), "%s/%s", sp->mounts[i].source,
		         fb->code_name ? fb->code_name : "");
		f = fopen(path, "r");
		if (f) {
			size_t n = fread(fb->code, 1, sizeof(fb->code) - 1, f);

			fb->code[n] = '\0';
			fclose(f);
		}
	}
}

static int fb_box_create(struct backend *be, const struct box_spec *sp,
                         struct box **out, char *err, size_t errlen)
{
	struct fake_backend *fb = (struct fake_backend *)be;
	struct fake_box *b;
	int sv[2];

	*out = NULL;
	fb_log(fb, "create");
	fb_note_spec(fb, sp);
	if (fb->next.create_rc < 0) {
		snprintf(err, errlen, "%s",
		         fb->next.err_msg ? fb->next.err_msg : "refused");
		return fb->next.create_rc;
	}
	b = calloc(1, sizeof(*b));
	if (!b || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		free(b);
		snprintf(err, errlen, "fake: no memory or sockets");
		return -ENOMEM;
	}
	b->base.impl = be->impl;
	b->base.be = be;
	snprintf(b->base.id, sizeof(b->base.id), "fake%d", fb->created++);
	b->fb = fb;
	b->script = fb->next;
	b->exit_code = b->script.exit_code;
	snprintf(b->sandbox, sizeof(b->sandbox), "%s", fb->sandbox);
	b->handover = sp->handover != NULL;
	b->stream_end = sv[0];
	b->box_end = sv[1];
	fb->boxes++;
	*out = &b->base;
	return 0;
}

static const struct box_stream_impl fs_impl;

/* The box's stream, for box_attach and box_channel alike. */
static int fb_stream_open(struct fake_box *b, struct box_stream **out,
                          char *err, size_t errlen)
{
	struct fake_stream *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "fake: no memory");
		return -ENOMEM;
	}
	s->base.impl = &fs_impl;
	s->box = b;
	s->fd = b->stream_end;
	b->stream_end = -1;
	fcntl(s->fd, F_SETFL, O_NONBLOCK);
	*out = &s->base;
	return 0;
}

static int fb_box_attach(struct box *bx, struct box_stream **out, char *err,
                         size_t errlen)
{
	struct fake_box *b = (struct fake_box *)bx;

	fb_log(b->fb, "attach");
	return fb_stream_open(b, out, err, errlen);
}

/* The same stream, as the lasting channel of a warm box. */
static int fb_box_channel(struct box *bx, struct box_stream **out, char *err,
                          size_t errlen)
{
	struct fake_box *b = (struct fake_box *)bx;

	fb_log(b->fb, "channel");
	return fb_stream_open(b, out, err, errlen);
}

static int fb_handover_prepare(struct backend *be, char *err, size_t errlen)
{
	fb_log((struct fake_backend *)be, "prepare");
	return 0;
}

/* Records the directory open at dirfd, where a mount would show it. */
static int fb_box_hand_over(struct box *bx, int dirfd, char *err, size_t errlen)
{
	struct fake_box *b = (struct fake_box *)bx;
	char link[64], path[256];
	ssize_t n;

	fb_log(b->fb, "handover");
	if (!b->handover || b->handed) {
		snprintf(err, errlen, "fake: %s",
		         b->handed ? "handed over already"
		                   : "made without spec.handover");
		return b->handed ? -EALREADY : -EINVAL;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0) {
		snprintf(err, errlen, "fake: %s: %s", link, strerror(errno));
		return -errno;
	}
	path[n] = '\0';
	pthread_mutex_lock(&b->fb->mu);
	snprintf(b->fb->handed, sizeof(b->fb->handed), "%s", path);
	pthread_mutex_unlock(&b->fb->mu);
	b->handed = true;
	return 0;
}

static bool fb_box_intact(const struct box *bx, char *detail, size_t len)
{
	const struct fake_box *b = (const struct fake_box *)bx;

	if (!b->handover || b->handed || !b->fb->handover_broken)
		return true;
	snprintf(detail, len, "its hand-over place was removed");
	return false;
}

/* Writes one frame to the box's end (small output: the socket's buffer
 * holds it, so this never blocks). */
static void fb_frame(int fd, int which, const char *p, size_t n)
{
	while (n) {
		size_t k = n > 60000 ? 60000 : n;
		unsigned char h[3] = {(unsigned char)which,
		                      (unsigned char)(k >> 8),
		                      (unsigned char)(k & 0xff)};

		if (write(fd, h, 3) != 3 || write(fd, p, k) != (ssize_t)k)
			return;
		p += k;
		n -= k;
	}
}

/* ---- a warm box's scripted agent ---------------------------------------- */

/* A frame handler's way to end the agent as if it exited 0 at once. */
#define FB_AGENT_EXIT (-ECONNABORTED)

/* Sends one agent frame (type, payload) as stdout of the box. Never
 * raises SIGPIPE: the daemon may have closed its end. */
static void fb_agent_send(struct fake_box *b, unsigned char type, const char *p,
                          size_t n)
{
	unsigned char buf[AGENTFRAME_HDR + 1024];
	unsigned char h[3] = {1, 0, 0};
	size_t len = AGENTFRAME_HDR + n;

	if (n > 1024 || agentframe_header(buf, type, n, AGENTFRAME_MAX) < 0)
		return;
	memcpy(buf + AGENTFRAME_HDR, p, n);
	h[1] = (unsigned char)(len >> 8);
	h[2] = (unsigned char)(len & 0xff);
	if (b->corked && b->cork_len + 3 + len <= sizeof(b->cork)) {
		memcpy(b->cork + b->cork_len, h, 3);
		memcpy(b->cork + b->cork_len + 3, buf, len);
		b->cork_len += 3 + len;
		return;
	}
	if (send(b->box_end, h, 3, MSG_NOSIGNAL) == 3)
		(void)send(b->box_end, buf, len, MSG_NOSIGNAL);
}

/* Sends what gathered while corked, in one send: the reader gets it in
 * one read. */
static void fb_agent_uncork(struct fake_box *b)
{
	if (b->cork_len)
		(void)send(b->box_end, b->cork, b->cork_len, MSG_NOSIGNAL);
	b->corked = false;
	b->cork_len = 0;
}

static void fb_agent_json(struct fake_box *b, unsigned char type,
                          const char *json)
{
	fb_agent_send(b, type, json, strlen(json));
}

static void fb_agent_ready(struct fake_box *b)
{
	fb_agent_json(b, 'R',
	              "{\"v\":1,\"kernel\":true,\"ms\":1,\"lost\":null}");
}

/* The D of exec id: the kernel kept, or lost (reason: it called exit(3)),
 * or interrupted (exit code 1, as KeyboardInterrupt). */
static void fb_agent_done(struct fake_box *b, uint64_t id, const char *lost,
                          bool interrupted)
{
	char d[512];

	snprintf(d, sizeof(d),
	         "{\"id\":%llu,\"exit_code\":%d,\"signal\":null,"
	         "\"interrupted\":%s,\"killed\":false,\"kernel\":\"%s\","
	         "\"kernel_reason\":%s%s%s,\"swept\":0,\"cpu_ms\":7,"
	         "\"mem\":{\"usage\":1000,\"peak\":2000,\"limit\":268435456,"
	         "\"oom_kills\":0},\"oom_killed\":false,\"error\":null}",
	         (unsigned long long)id,
	         lost          ? 3
	         : interrupted ? 1
	                       : 0,
	         interrupted ? "true" : "false", lost ? "lost" : "kept",
	         lost ? "\"" : "", lost ? lost : "null", lost ? "\"" : "");
	fb_agent_json(b, 'D', d);
}

/* Reads the code file an exec names, from the box's /sandbox mount. */
static void fb_agent_code(struct fake_box *b, const unsigned char *f, size_t n)
{
	char path[600];
	FILE *fp;
	size_t got = 0;

	if (n <= 9 || memcmp(f, "/sandbox/", 9) != 0)
		return;
	snprintf(path, sizeof(path), "%s/%.*s", b->sandbox, (int)(n - 9),
	         (const char *)f + 9);
	fp = fopen(path, "r");
	pthread_mutex_lock(&b->fb->mu);
	if (fp)
		got = fread(b->fb->exec_code, 1, sizeof(b->fb->exec_code) - 1,
		            fp);
	b->fb->exec_code[got] = '\0';
	b->fb->execs++;
	pthread_mutex_unlock(&b->fb->mu);
	if (fp)
		fclose(fp);
}

/* The id of a request (its 'n' record), or 0; the code file seen too. */
static uint64_t fb_agent_request(struct fake_box *b, unsigned char type,
                                 const unsigned char *p, size_t n)
{
	struct agentframe_tlv it;
	const unsigned char *v;
	unsigned char tag;
	size_t len;
	uint64_t id = 0;

	agentframe_tlv_init(&it, p, n);
	while (agentframe_tlv_next(&it, &tag, &v, &len) == 1) {
		if (tag == 'n' && agentframe_parse_id(v, len, &id) < 0)
			id = 0;
		if (tag == 'f' && type == 'E')
			fb_agent_code(b, v, len);
	}
	return id;
}

/* One exec: output, then X and D, as the script says for its number. */
static int fb_agent_exec(struct fake_box *b, uint64_t id)
{
	const struct fake_agent *ag = b->script.agent;
	char out[128], x[256];
	unsigned k = ++b->execs;

	snprintf(out, sizeof(out), "%s call %u\n", b->base.id, k);
	fb_agent_json(b, 'o', out);
	if (ag->die_at == k)
		return FB_AGENT_EXIT;
	if (ag->hang_at == k) {
		b->held = id;
		return 0;
	}
	snprintf(x, sizeof(x),
	         "{\"id\":%llu,\"status\":\"ok\",\"value\":{\"text/plain\":"
	         "\"%u\"},\"error\":null,\"figures\":[],\"exit_code\":null}",
	         (unsigned long long)id, k);
	fb_agent_json(b, 'X', x);
	if (ag->lose_at == k && ag->ready_with_done) {
		/* D and the new kernel's R in one read of the daemon's. */
		b->corked = true;
		fb_agent_done(b, id, "exit", false);
		fb_agent_ready(b);
		fb_agent_uncork(b);
		return 0;
	}
	fb_agent_done(b, id, ag->lose_at == k ? "exit" : NULL, false);
	if (ag->lose_at == k) {
		/* A new kernel takes a moment to start, as a real one does. */
		poll(NULL, 0, 50);
		fb_agent_ready(b);
	}
	return 0;
}

static int fb_agent_frame(void *arg, unsigned char type, const unsigned char *p,
                          size_t n)
{
	struct fake_box *b = arg;
	uint64_t id = fb_agent_request(b, type, p, n);

	switch (type) {
	case 'E':
		fb_log(b->fb, "exec");
		return fb_agent_exec(b, id);
	case 'C':
		fb_log(b->fb, "claim");
		fb_agent_json(b, 'A', "{\"cwd\":\"/data\",\"error\":null}");
		return 0;
	case 'I':
		fb_log(b->fb, "interrupt");
		if (id && id == b->held) {
			b->held = 0;
			fb_agent_done(b, id, NULL, true);
		}
		return 0;
	case 'K':
		fb_log(b->fb, "kill");
		return 0;
	case 'P':
		fb_agent_send(b, 'p', "", 0);
		return 0;
	default:
		return -EPROTO; /* the real agent exits 3 */
	}
}

/* The agent: R, then frames until its input ends or a script ends it. */
static void *fb_agent_main(void *arg)
{
	struct fake_box *b = arg;
	struct agentframe_decoder d;
	unsigned char buf[4096];
	int rc = 0;

	agentframe_decoder_init(&d, AGENTFRAME_MAX_IN);
	if (!b->script.agent->no_ready)
		fb_agent_ready(b);
	while (rc == 0) {
		ssize_t n = read(b->box_end, buf, sizeof(buf));

		if (n <= 0)
			break;
		rc = agentframe_feed(&d, buf, (size_t)n, fb_agent_frame, b);
	}
	agentframe_decoder_finish(&d);
	pthread_mutex_lock(&b->fb->mu);
	b->running = false;
	if (!b->killed)
		b->exit_code = rc < 0 && rc != FB_AGENT_EXIT ? 3 : 0;
	pthread_mutex_unlock(&b->fb->mu);
	shutdown(b->box_end, SHUT_WR);
	return NULL;
}

static int fb_box_start(struct box *bx, char *err, size_t errlen)
{
	struct fake_box *b = (struct fake_box *)bx;
	const struct fake_script *sc = &b->script;

	fb_log(b->fb, "start");
	b->started = b->running = true;
	if (sc->agent) {
		if (pthread_create(&b->agent, NULL, fb_agent_main, b) != 0) {
			snprintf(err, errlen, "fake: no thread for the agent");
			return -EAGAIN;
		}
		b->agent_started = true;
		return 0;
	}
	if (sc->out)
		fb_frame(b->box_end, 1, sc->out,
		         sc->out_len ? sc->out_len : strlen(sc->out));
	if (sc->err)
		fb_frame(b->box_end, 2, sc->err, strlen(sc->err));
	if (!sc->hang) {
		pthread_mutex_lock(&b->fb->mu);
		b->running = false;
		pthread_mutex_unlock(&b->fb->mu);
		shutdown(b->box_end, SHUT_WR);
	}
	return 0;
}

static bool fb_running(struct fake_box *b)
{
	bool r;

	pthread_mutex_lock(&b->fb->mu);
	r = b->running;
	pthread_mutex_unlock(&b->fb->mu);
	return r;
}

static int fb_box_wait(struct box *bx, unsigned timeout_ms, char *err,
                       size_t errlen)
{
	struct fake_box *b = (struct fake_box *)bx;
	long long end = mono_ms() + timeout_ms;

	fb_log(b->fb, "wait");
	while (fb_running(b)) {
		if (mono_ms() >= end) {
			snprintf(err, errlen, "fake: still running");
			return -ETIMEDOUT;
		}
		poll(NULL, 0, 5);
	}
	return 0;
}

static int fb_box_inspect(struct box *bx, struct box_state *out, char *err,
                          size_t errlen)
{
	struct fake_box *b = (struct fake_box *)bx;

	fb_log(b->fb, "inspect");
	memset(out, 0, sizeof(*out));
	out->running = fb_running(b);
	out->oom_killed = b->script.oom;
	pthread_mutex_lock(&b->fb->mu);
	out->exit_code = b->killed ? 137 : b->exit_code;
	pthread_mutex_unlock(&b->fb->mu);
	snprintf(out->status, sizeof(out->status), "%s",
	         out->running ? "running" : "exited");
	return 0;
}

static int fb_box_signal(struct box *bx, const char *sig, char *err,
                         size_t errlen)
{
	struct fake_box *b = (struct fake_box *)bx;
	char word[32];

	snprintf(word, sizeof(word), "signal:%s", sig);
	fb_log(b->fb, word);
	if (!fb_running(b)) {
		snprintf(err, errlen, "fake: not running");
		return -ESRCH;
	}
	if (strcmp(sig, "KILL") == 0) {
		pthread_mutex_lock(&b->fb->mu);
		b->running = false;
		b->killed = true;
		pthread_mutex_unlock(&b->fb->mu);
		/* An agent's thread stops reading too, as a killed box does. */
		shutdown(b->box_end, b->agent_started ? SHUT_RDWR : SHUT_WR);
	}
	return 0;
}

static void fb_box_release(struct box *bx)
{
	struct fake_box *b = (struct fake_box *)bx;

	fb_log(b->fb, "release");
	if (b->agent_started) {
		shutdown(b->box_end, SHUT_RDWR);
		pthread_join(b->agent, NULL);
	}
	if (b->box_end >= 0)
		close(b->box_end);
	if (b->stream_end >= 0)
		close(b->stream_end);
	b->fb->boxes--;
	free(b);
}

static int fb_box_usage(struct box *bx, struct box_usage *out, char *err,
                        size_t errlen)
{
	out->memory_peak_bytes = 12345678;
	out->cpu_ms = 42;
	return 0;
}

static const struct backend_impl fb_impl = {
    .name = "fake",
    .destroy = fb_destroy,
    .images = fb_images,
    .reap = fb_reap,
    .sweep_own = fb_sweep_own,
    .health = fb_health,
    .ping = fb_ping,
    .handover_prepare = fb_handover_prepare,
    .box_create = fb_box_create,
    .box_attach = fb_box_attach,
    .box_channel = fb_box_channel,
    .box_hand_over = fb_box_hand_over,
    .box_intact = fb_box_intact,
    .box_start = fb_box_start,
    .box_wait = fb_box_wait,
    .box_inspect = fb_box_inspect,
    .box_signal = fb_box_signal,
    .box_release = fb_box_release,
    .box_usage = fb_box_usage,
};

/* ---- the stream ---------------------------------------------------------- */

static int fs_fd(const struct box_stream *bs)
{
	return ((const struct fake_stream *)bs)->fd;
}

/* Whether a whole frame is buffered. */
static bool fs_frame_ready(const struct fake_stream *s)
{
	return s->len >= 3 &&
	       s->len >= 3 + (((size_t)s->buf[1] << 8) | s->buf[2]);
}

static bool fs_pending(const struct box_stream *bs)
{
	return fs_frame_ready((const struct fake_stream *)bs);
}

static int fs_pump(struct box_stream *bs, box_output_fn fn, void *arg,
                   char *err, size_t errlen)
{
	struct fake_stream *s = (struct fake_stream *)bs;
	ssize_t n;
	int got = 0;

	if (!fs_frame_ready(s) && !s->eof) {
		n = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
		if (n == 0)
			s->eof = true;
		else if (n < 0 && errno != EAGAIN) {
			snprintf(err, errlen, "fake: read: %s",
			         strerror(errno));
			return -EIO;
		} else if (n > 0)
			s->len += (size_t)n;
	}
	while (fs_frame_ready(s)) {
		size_t k = ((size_t)s->buf[1] << 8) | s->buf[2];
		int rc = fn(arg, s->buf[0], (const char *)s->buf + 3, k);

		memmove(s->buf, s->buf + 3 + k, s->len - 3 - k);
		s->len -= 3 + k;
		got = 1;
		if (rc < 0)
			return rc;
	}
	if (got)
		return 1;
	return s->eof ? 0 : -EAGAIN;
}

static ssize_t fs_write(struct box_stream *bs, const void *p, size_t n)
{
	struct fake_stream *s = (struct fake_stream *)bs;
	struct fake_backend *fb = s->box->fb;
	size_t room = sizeof(fb->stdin_got) - 1 - fb->stdin_len;
	ssize_t w;

	if (s->box->script.agent) {
		/* The agent reads what the daemon writes. */
		w = send(s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		return w < 0 ? -errno : w;
	}
	if (n > room)
		n = room;
	memcpy(fb->stdin_got + fb->stdin_len, p, n);
	fb->stdin_len += n;
	fb->stdin_got[fb->stdin_len] = '\0';
	return n ? (ssize_t)n : -EPIPE;
}

static void fs_close_write(struct box_stream *bs)
{
	struct fake_stream *s = (struct fake_stream *)bs;

	s->box->fb->stdin_closed = true;
	fb_log(s->box->fb, "close_write");
}

static void fs_close(struct box_stream *bs)
{
	struct fake_stream *s = (struct fake_stream *)bs;

	fb_log(s->box->fb, "stream_close");
	close(s->fd);
	free(s);
}

static const struct box_stream_impl fs_impl = {
    .fd = fs_fd,
    .pending = fs_pending,
    .pump = fs_pump,
    .write = fs_write,
    .close_write = fs_close_write,
    .close = fs_close,
};

/* ---- the test's side ----------------------------------------------------- */

void fake_backend_init(struct fake_backend *fb, unsigned features)
{
	memset(fb, 0, sizeof(*fb));
	fb->impl = fb_impl;
	fb->impl.features = features;
	fb->base.impl = &fb->impl;
	pthread_mutex_init(&fb->mu, NULL);
}

void fake_backend_next(struct fake_backend *fb, const struct fake_script *s)
{
	fb->next = *s;
}

void fake_backend_clear(struct fake_backend *fb)
{
	pthread_mutex_lock(&fb->mu);
	fb->log[0] = '\0';
	fb->stdin_got[0] = '\0';
	fb->stdin_len = 0;
	fb->stdin_closed = false;
	pthread_mutex_unlock(&fb->mu);
}

unsigned fake_backend_count(struct fake_backend *fb, const char *word)
{
	size_t n = strlen(word);
	unsigned k = 0;

	pthread_mutex_lock(&fb->mu);
	for (const char *p = fb->log; (p = strstr(p, word)); p += n)
		if ((p == fb->log || p[-1] == ' ') &&
		    (p[n] == ' ' || p[n] == '\0'))
			k++;
	pthread_mutex_unlock(&fb->mu);
	return k;
}

bool fake_backend_before(struct fake_backend *fb, const char *a, const char *b)
{
	const char *pa, *pb;
	bool r;

	pthread_mutex_lock(&fb->mu);
	pa = strstr(fb->log, a);
	pb = strstr(fb->log, b);
	r = pa && pb && pa < pb;
	pthread_mutex_unlock(&fb->mu);
	return r;
}
