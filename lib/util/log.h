/* SPDX-License-Identifier: MIT */
/*
 * log: levelled, timestamped logging to stderr. Every line carries the
 * source file and line through the macros below, and the level is checked
 * before any argument is evaluated. Thread-safe: each line is written with a
 * single write(2). Never pass tokens, secrets or user content: log a
 * fingerprint (log_fingerprint) instead.
 */
#ifndef MCPSD_LOG_H
#define MCPSD_LOG_H

#include <stddef.h>

enum log_level {
	LOG_LEVEL_DEBUG = 0,
	LOG_LEVEL_INFO,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
};

extern enum log_level log_threshold;

/* Sets the threshold; messages below it are dropped. */
void log_set_level(enum log_level level);

/* Parses "debug", "info", "warn", "error". Returns 0 or -EINVAL. */
__attribute__((warn_unused_result)) int log_parse_level(const char *s,
                                                        enum log_level *out);

/* Selects "text" (default) or "json" line format. Returns 0 or -EINVAL. */
__attribute__((warn_unused_result)) int log_set_format(const char *s);

void log_write(enum log_level level, const char *file, int line, int errnum,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * Writes the first 12 hex characters of SHA-256(data) into out (13 bytes
 * including NUL), so a secret or an id can be told apart in logs without
 * being revealed.
 */
void log_fingerprint(const void *data, size_t len, char out[13]);

#define log_at_(lvl, err, ...)                                                 \
	do {                                                                   \
		if ((lvl) >= log_threshold)                                    \
			log_write((lvl), __FILE__, __LINE__, (err),            \
			          __VA_ARGS__);                                \
	} while (0)

#define log_debug(...) log_at_(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_at_(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_warnx(...) log_at_(LOG_LEVEL_WARN, 0, __VA_ARGS__)
#define log_warn(...) log_at_(LOG_LEVEL_WARN, errno, __VA_ARGS__)
#define log_errorx(...) log_at_(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_error(...) log_at_(LOG_LEVEL_ERROR, errno, __VA_ARGS__)

#endif
