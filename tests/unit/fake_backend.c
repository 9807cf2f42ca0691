/* SPDX-License-Identifier: MIT */
/*
 * fake_backend: see fake_backend.h. A box's stream is one end of a socket
 * pair; the box writes frames (which, length in two bytes, bytes) to the
 * other end, and the stream's pump takes them apart.
 */
#include "fake_backend.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/mono.h"

struct fake_box {
	struct box base;
	struct fake_backend *fb;
	struct fake_script script;
	int box_end; /* the box's end of the stream, or -1 */
	int stream_end;
	bool started, running, killed;
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
	fb->sandbox[0] = fb->code[0] = '\0';
	for (size_t i = 0; i < sp->n_mounts; i++) {
		char path[512];
		FILE *f;

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
	snprintf(b->base.id, sizeof(b->base.id), "fake%d", fb->boxes);
	b->fb = fb;
	b->script = fb->next;
	b->stream_end = sv[0];
	b->box_end = sv[1];
	fb->boxes++;
	*out = &b->base;
	return 0;
}

static const struct box_stream_impl fs_impl;

static int fb_box_attach(struct box *bx, struct box_stream **out, char *err,
                         size_t errlen)
{
	struct fake_box *b = (struct fake_box *)bx;
	struct fake_stream *s = calloc(1, sizeof(*s));

	fb_log(b->fb, "attach");
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

static int fb_box_start(struct box *bx, char *err, size_t errlen)
{
	struct fake_box *b = (struct fake_box *)bx;
	const struct fake_script *sc = &b->script;

	fb_log(b->fb, "start");
	b->started = b->running = true;
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
	out->exit_code = b->killed ? 137 : b->script.exit_code;
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
		shutdown(b->box_end, SHUT_WR);
	}
	return 0;
}

static void fb_box_release(struct box *bx)
{
	struct fake_box *b = (struct fake_box *)bx;

	fb_log(b->fb, "release");
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
    .box_create = fb_box_create,
    .box_attach = fb_box_attach,
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
