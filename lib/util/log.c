/* SPDX-License-Identifier: MIT */
/*
 * log: formats one line per message into a stack buffer and writes it with
 * a single write(2) so lines from different threads never interleave.
 */
#include "util/hex.h"
#include "util/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

enum log_level log_threshold = LOG_LEVEL_INFO;
static int log_json;

void log_set_level(enum log_level level)
{
	log_threshold = level;
}

int log_parse_level(const char *s, enum log_level *out)
{
	static const char *const names[] = {"debug", "info", "warn", "error"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcasecmp(s, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	if (strcasecmp(s, "warning") == 0) {
		*out = LOG_LEVEL_WARN;
		return 0;
	}
	return -EINVAL;
}

int log_set_format(const char *s)
{
	if (strcmp(s, "text") == 0)
		log_json = 0;
	else if (strcmp(s, "json") == 0)
		log_json = 1;
	else
		return -EINVAL;
	return 0;
}

/* Appends s to out as the body of a JSON string (no quotes). */
static size_t json_escape_into(char *out, size_t cap, size_t pos, const char *s)
{
	for (; *s && pos + 7 < cap; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			out[pos++] = '\\';
			out[pos++] = (char)c;
		} else if (c < 0x20) {
			pos += (size_t)snprintf(out + pos, cap - pos, "\\u%04x",
			                        c);
		} else {
			out[pos++] = (char)c;
		}
	}
	return pos;
}

void log_write(enum log_level level, const char *file, int line, int errnum,
               const char *fmt, ...)
{
	static const char *const names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
	char msg[2048];
	char out[4200];
	char ts[40];
	struct timespec now;
	struct tm tm;
	const char *base = strrchr(file, '/');
	va_list ap;
	size_t n;
	int saved = errno;

	base = base ? base + 1 : file;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (errnum) {
		char eb[128];
		size_t ml = strlen(msg);

		snprintf(msg + ml, sizeof(msg) - ml, ": %s",
		         strerror_r(errnum, eb, sizeof(eb)));
	}
	/* Control characters would let a crafted value forge log lines. */
	for (char *p = msg; *p; p++) {
		if ((unsigned char)*p < 0x20)
			*p = ' ';
	}
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", now.tv_nsec / 1000000);

	if (log_json) {
		n = (size_t)snprintf(out, sizeof(out),
		                     "{\"time\":\"%s\",\"level\":\"%s\","
		                     "\"src\":\"%s:%d\",\"msg\":\"",
		                     ts, names[level], base, line);
		n = json_escape_into(out, sizeof(out), n, msg);
		n += (size_t)snprintf(out + n, sizeof(out) - n, "\"}\n");
	} else {
		n = (size_t)snprintf(out, sizeof(out), "%s %-5s %s (%s:%d)\n",
		                     ts, names[level], msg, base, line);
	}
	if (n >= sizeof(out)) {
		n = sizeof(out) - 1;
		out[n - 1] = '\n';
	}
	ssize_t w = write(STDERR_FILENO, out, n);
	(void)w;
	errno = saved;
}

void log_fingerprint(const void *data, size_t len, char out[13])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
	hex_encode(md, 6, out);
}
