/* SPDX-License-Identifier: MIT */
/*
 * fstree: safe file system primitives beneath a directory fd, for trees that
 * hostile code has written (symlinks to /etc/shadow or /proc/self/environ,
 * FIFOs, sockets, device nodes, setuid files, names with CR/LF, directories
 * thousands of levels deep or with mode 000). Nothing here follows a
 * symbolic link or leaves the tree:
 *   - opens go through openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 *     RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV and O_NOFOLLOW | O_NONBLOCK,
 *     so a FIFO never blocks and a link is an error, not a redirection;
 *   - walks for listings visit only names that pass fsname, to a bounded
 *     depth and count;
 *   - removal and measurement are iterative depth-first walks that hold one
 *     directory fd at a time, climb back with ".." only after checking that
 *     it is the very directory they came from (device and inode), and never
 *     cross to another file system, so depth costs memory (24 bytes a
 *     level), not recursion or file descriptors.
 *
 * Stateless; thread-safe as long as callers do not share fds.
 */
#ifndef MCPSD_FSTREE_H
#define MCPSD_FSTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * Opens rel (a path that passed fsname_check, or "." for dirfd itself)
 * beneath dirfd with openat2 as described above. flags are open(2) flags;
 * O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC are always added. Returns the fd
 * (caller closes) or a negative errno: -ELOOP or -EXDEV when a component is
 * a link or leaves the tree, -ENOENT, ...
 */
__attribute__((warn_unused_result)) int fstree_open(int dirfd, const char *rel,
                                                    int flags, mode_t mode);

/*
 * Opens rel beneath dirfd for reading and checks with fstat that it is a
 * regular file. Returns the fd (caller closes) with *st filled, -ENOENT when
 * it does not exist or is not a regular file (directory, FIFO, socket,
 * device, symlink: nothing about what it is shows to callers that map
 * errors to 404), or another negative errno.
 */
__attribute__((warn_unused_result)) int
fstree_open_regular(int dirfd, const char *rel, struct stat *st);

/*
 * Opens the directory rel beneath dirfd, creating it and its missing parents
 * (mode 0755, owned by uid:gid when uid is not (uid_t)-1). rel "" or "."
 * means dirfd itself. Returns an O_DIRECTORY fd (caller closes) or a
 * negative errno (-ELOOP when a component is a symlink, -ENOTDIR when it is
 * a file).
 */
__attribute__((warn_unused_result)) int
fstree_mkdirs(int dirfd, const char *rel, uid_t uid, gid_t gid);

/* One entry found by fstree_walk. */
struct fstree_entry {
	const char *rel;       /* path below the walk's root (valid) */
	const char *name;      /* last segment of rel */
	const struct stat *st; /* lstat of the entry */
};

/* What a walk left out. */
struct fstree_walk_stats {
	size_t visited;       /* entries passed to the callback */
	size_t invalid_names; /* names fsname refuses (not visited) */
	size_t too_deep;      /* directories beyond FSNAME_DEPTH_MAX */
	size_t unreadable;    /* directories that could not be opened */
	bool truncated;       /* stopped at max_entries */
};

/*
 * Returns 0 to go on, 1 to stop the walk (not an error), FSTREE_WALK_SKIP
 * to go on without descending into this directory, or a negative errno to
 * abort it.
 */
#define FSTREE_WALK_SKIP 2
typedef int (*fstree_walk_fn)(void *data, const struct fstree_entry *e);

/*
 * Breadth-first walk of the tree at rel ("" for dirfd itself) beneath
 * dirfd, in name order within each directory. Every entry whose name passes
 * fsname_check_segment is passed to fn (directories too, before their
 * contents); directories are descended into when fn returns 0 for them and
 * they are on the same file system. At most max_entries entries are
 * visited. Returns 0 (also when fn stopped it), or a negative errno from
 * opening the root or from fn. stats is optional.
 */
__attribute__((warn_unused_result)) int
fstree_walk(int dirfd, const char *rel, size_t max_entries, fstree_walk_fn fn,
            void *data, struct fstree_walk_stats *stats);

/*
 * Removes the entry name of the directory parentfd and, when it is a
 * directory, everything below it, iteratively (see above): regular files,
 * symlinks (never followed), FIFOs, sockets, device nodes, and directories
 * whose mode denies their owner (made 0700 first). Returns 0 (also when
 * name does not exist), -EAGAIN when the tree changed under the walk in a
 * way that could lead outside it (try again later), -EXDEV when a mount
 * point is inside, or another negative errno.
 */
__attribute__((warn_unused_result)) int fstree_remove(int parentfd,
                                                      const char *name);

/* Usage of a tree. */
struct fstree_usage {
	uint64_t bytes; /* allocated bytes (st_blocks * 512) */
	uint64_t files; /* entries of any type, directories included */
	unsigned depth; /* deepest level seen */
};

/*
 * Measures everything below the directory dirfd (not counting dirfd
 * itself), iteratively, without following links or crossing file systems.
 * Stops early, with the totals so far, once bytes exceeds max_bytes or
 * files exceeds max_files (0: no limit). Returns 0, -EAGAIN as
 * fstree_remove, or another negative errno.
 */
__attribute__((warn_unused_result)) int
fstree_measure(int dirfd, uint64_t max_bytes, uint64_t max_files,
               struct fstree_usage *out);

#endif
