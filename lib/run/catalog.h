/* SPDX-License-Identifier: MIT */
/*
 * catalog: runner images as their labels describe them, and the resolution
 * of languages and aliases to one image each. The label contract:
 *   sandbox.runner=true        required
 *   sandbox.language           required, e.g. python
 *   sandbox.filename           required, e.g. main.py (written to /sandbox)
 *   sandbox.command            required, JSON array, e.g.
 *                              ["python3","-u","/sandbox/main.py"]
 *   sandbox.check              optional JSON array: a command that checks
 *                              /sandbox/<filename> without running it
 *                              (check_code); e.g. ["bash","-n",
 *                              "/sandbox/main.sh"]
 *   sandbox.aliases            comma list, e.g. py,python3
 *   sandbox.watchdog           absolute path of a coreutils timeout(1)
 *   sandbox.priority           integer; the highest wins a language
 *   sandbox.version, sandbox.description, sandbox.libraries ("name version"
 *   comma list): shown in tool descriptions.
 * Everything here is pure (no Docker calls). A struct catalog is an
 * immutable snapshot with an atomic reference count, so any thread may
 * hold and read one.
 */
#ifndef MCPSD_CATALOG_H
#define MCPSD_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#define CATALOG_NAME_MAX 32    /* languages and aliases */
#define CATALOG_COMMAND_MAX 64 /* elements of sandbox.command */

/* One runner image. Strings are owned. */
struct catalog_image {
	char *language; /* lower case, [a-z0-9][a-z0-9_+.-]{0,31} */
	char **aliases; /* the aliases this image won (see catalog_build) */
	size_t n_aliases;
	char *image;    /* display reference: first tag, else short id */
	char *image_id; /* "sha256:..." — what containers are made from */
	char *filename; /* the code file's name in /sandbox */
	char **command; /* argv that runs /sandbox/<filename> */
	size_t n_command;
	char **check; /* argv of the syntax check, or NULL (n_check 0) */
	size_t n_check;
	char *watchdog; /* absolute path of a timeout(1), or NULL */
	/* sandbox.kernel: the argv of the language's long-lived interpreter
	 * (the agent's --kernel) for stateful warm sessions, or NULL */
	char **kernel;
	size_t n_kernel;
	/* sandbox.packages: the package manager ("pip", "npm"), or "" */
	char packages[8];
	char *version;     /* "" when not labelled */
	char *description; /* "" when not labelled */
	char **libraries;  /* "name version" */
	size_t n_libraries;
	long priority;
	long long created; /* unix seconds */
};

/* An immutable snapshot, sorted by language. */
struct catalog {
	size_t n;
	struct catalog_image *items;
	unsigned refs_;     /* private */
	char *fingerprint_; /* private: what catalog_same compares */
};

/*
 * Parses one image summary of GET /images/json (Id, RepoTags, Created,
 * Labels) into out (release with catalog_image_finish). All aliases from
 * the label are kept; catalog_build later drops those it gives to others.
 * -EINVAL with the reason in err when the labels are incomplete or wrong,
 * -ENOMEM.
 */
__attribute__((warn_unused_result)) int
catalog_image_parse(const cJSON *summary, struct catalog_image *out, char *err,
                    size_t errlen);
void catalog_image_finish(struct catalog_image *img);

/*
 * Builds a catalog from an array of image summaries (NULL: empty). Per
 * language the image with the highest sandbox.priority wins, then the
 * newest Created, then the smallest image id, whatever the listing order.
 * An alias goes to no one if it is some runner's language, otherwise to
 * the best-ranked winner claiming it. Images with bad labels are skipped
 * with a warning. Returns 0 and *out (one reference; catalog_put), or
 * -ENOMEM.
 */
__attribute__((warn_unused_result)) int catalog_build(const cJSON *summaries,
                                                      struct catalog **out);

/* Takes another reference and returns c. */
struct catalog *catalog_ref(struct catalog *c);
/* Drops a reference; the last one frees. NULL-safe. */
void catalog_put(struct catalog *c);

/* Whether two catalogs describe the same runners (labels and images). */
bool catalog_same(const struct catalog *a, const struct catalog *b);

/*
 * The runner for a language or alias, case-insensitive (borrowed from c,
 * valid while the reference is held), or NULL.
 */
const struct catalog_image *catalog_find(const struct catalog *c,
                                         const char *name);

/* Writes "bash, python, typescript" (or "none") into out. */
void catalog_languages(const struct catalog *c, char *out, size_t len);

/* The same for the languages whose image has a sandbox.check. */
void catalog_checkable(const struct catalog *c, char *out, size_t len);

/* The same for those with a sandbox.packages: "python (pip), ...". */
void catalog_installable(const struct catalog *c, char *out, size_t len);

#endif
