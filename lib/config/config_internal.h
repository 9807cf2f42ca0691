/* SPDX-License-Identifier: MIT */
/*
 * config_internal: what config.c (the table, parsing, printing),
 * config_derive.c (the settings that depend on others), config_load.c
 * (which calls both, in order) and config_doc.c share. Not for other
 * modules: they read struct config.
 */
#ifndef MCPSD_CONFIG_INTERNAL_H
#define MCPSD_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

enum setting_type {
	SET_STR,
	SET_SECRET,
	SET_BOOL,
	SET_UINT,
	SET_BYTES,
	SET_DOUBLE,
	SET_SECTION, /* not a setting: a heading over the rows after it */
};

struct setting {
	const char *name;
	enum setting_type type;
	const char *def;
	size_t off; /* SIZE_MAX: derived, handled after the table */
	double min, max;
	const char *example;
	const char *help;
};

#define OFF(f) offsetof(struct config, f)
#define DERIVED SIZE_MAX

/*
 * A heading row: the settings after it, up to the next one, form a group
 * with this title and introduction in --help and the generated reference.
 */
#define SECTION(title, intro)                                                  \
	{                                                                      \
		title, SET_SECTION, "", DERIVED, 0, 0, "", intro               \
	}

/* The table's entry for name, or NULL (headings are never found). */
const struct setting *config_setting_find(const char *name);

/* The whole table, headings included, in order; *n rows. Static. */
const struct setting *config_settings(size_t *n);

/* The raw value of a setting: the environment, the .env file or default. */
const char *config_raw(const struct config *cfg, const char *name);

/* true/false, yes/no, on/off, 1/0; -EINVAL otherwise. */
int config_parse_bool(const char *s, bool *out);

/* 127.0.0.0/8, ::1 or localhost. */
bool config_host_is_loopback(const char *h);

/* Replaces *dst with a copy of v; -ENOMEM. */
int config_set_str(char **dst, const char *v);

/* Checks an http(s) base URL setting and trims its trailing '/'. */
int config_check_base_url(const char *name, char **url, char *err,
                          size_t errlen);

/* A comma-separated list into a NULL-terminated array (owned); -ENOMEM. */
int config_split_list(const char *s, char ***out);

/* Appends a copy of item to a NULL-terminated list; -ENOMEM. */
int config_list_add(char ***list, const char *item);

/* The number of entries of a NULL-terminated list. */
size_t config_strlen_list(char **v);

/* A URL's origin (scheme://host[:port]) and host[:port]. */
void config_url_parts(const char *url, char *origin, size_t olen,
                      char *hostport, size_t hlen);

/*
 * Parses the table's rows into cfg (its raw values: config_raw); derived
 * rows are left to config_derive. -EINVAL with a message, -ENOMEM.
 */
int config_parse_table(struct config *cfg, char *err, size_t errlen);

/* The settings that depend on others (config_derive.c). */
int config_derive(struct config *cfg, char *err, size_t errlen);

#endif
