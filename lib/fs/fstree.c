/* SPDX-License-Identifier: MIT */
/*
 * fstree: openat2 wrappers, a breadth-first walk over valid names, and an
 * iterative depth-first engine shared by removal and measurement. The
 * engine holds a single directory fd; going back up it opens ".." and
 * accepts it only when its device and inode are those recorded on the way
 * down, which is what makes a tree that code renamed under us harmless: the
 * walk stops with -EAGAIN instead of wandering into a neighbour.
 */
#include "fs/fstree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs/fsname.h"
#include "util/log.h"

#define RESOLVE_SAFE                                                           \
	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |       \
	 RESOLVE_NO_XDEV)

/* A directory with more names than this is read only this far. */
#define WALK_DIR_MAX 200000
/* Descents into the same tree before giving up (a writer racing us). */
#define DFS_DESCENTS_MAX 50000000ULL

int fstree_open(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how;
	long fd;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		how.mode = mode;
	how.resolve = RESOLVE_SAFE;
	if (!rel || !rel[0])
		rel = ".";
	/* EAGAIN: a rename raced the lookup; the kernel asks for a retry. */
	for (int i = 0; i < 8; i++) {
		fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno != EAGAIN)
			break;
	}
	return -errno;
}

int fstree_open_regular(int dirfd, const char *rel, struct stat *st)
{
	int fd = fstree_open(dirfd, rel, O_RDONLY, 0);

	memset(st, 0, sizeof(*st));
	if (fd < 0) {
		/*
		 * A link (-ELOOP, -EXDEV), a socket (-ENXIO), a component
		 * that is a file (-ENOTDIR) or a node on a nodev mount
		 * (-EACCES) is simply not a file that can be read here.
		 */
		if (fd == -ELOOP || fd == -EXDEV || fd == -ENXIO ||
		    fd == -ENOTDIR || fd == -EACCES || fd == -ENAMETOOLONG ||
		    fd == -EPERM || fd == -ENODEV || fd == -EOPNOTSUPP)
			return -ENOENT;
		return fd;
	}
	if (fstat(fd, st) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		memset(st, 0, sizeof(*st));
		return -ENOENT;
	}
	return fd;
}

/* Creates seg in cur and opens it; a concurrent mkdir is fine. */
static int make_dir(int cur, const char *seg, uid_t uid, gid_t gid)
{
	int fd;

	if (mkdirat(cur, seg, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = fstree_open(cur, seg, O_RDONLY | O_DIRECTORY, 0);
	if (fd >= 0 && uid != (uid_t)-1 && fchown(fd, uid, gid) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int fstree_mkdirs(int dirfd, const char *rel, uid_t uid, gid_t gid)
{
	char path[FSNAME_PATH_MAX + 1];
	char *seg, *next;
	int cur, fd;

	cur = fstree_open(dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
	if (cur < 0 || !rel || !rel[0] || strcmp(rel, ".") == 0)
		return cur;
	if (strlen(rel) > FSNAME_PATH_MAX) {
		close(cur);
		return -ENAMETOOLONG;
	}
	snprintf(path, sizeof(path), "%s", rel);
	for (seg = path; seg; seg = next) {
		next = strchr(seg, '/');
		if (next)
			*next++ = '\0';
		fd = fstree_open(cur, seg, O_RDONLY | O_DIRECTORY, 0);
		if (fd == -ENOENT)
			fd = make_dir(cur, seg, uid, gid);
		if (fd == -ENOTDIR) {
			struct stat st;

			/* O_DIRECTORY hides a final symlink as ENOTDIR. */
			if (fstatat(cur, seg, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode))
				fd = -ELOOP;
		}
		close(cur);
		if (fd < 0)
			return fd;
		cur = fd;
	}
	return cur;
}

/* ---- breadth-first walk ------------------------------------------- */

struct queue {
	char **items;
	size_t head, n, cap;
};

static int queue_push(struct queue *q, char *s)
{
	if (q->n == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 16;
		char **p;

		if (q->head) {
			memmove(q->items, q->items + q->head,
			        (q->n - q->head) * sizeof(*q->items));
			q->n -= q->head;
			q->head = 0;
		}
		if (q->n == q->cap) {
			p = realloc(q->items, ncap * sizeof(*p));
			if (!p)
				return -ENOMEM;
			q->items = p;
			q->cap = ncap;
		}
	}
	q->items[q->n++] = s;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the names of a directory (without "." and ".."), sorted. */
static int read_names(int dfd, char ***out, size_t *n_out, bool *truncated)
{
	int fd = dup(dfd);
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	*out = NULL;
	*n_out = 0;
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (n >= WALK_DIR_MAX) {
			*truncated = true;
			break;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			char **p = realloc(names, ncap * sizeof(*p));

			if (!p) {
				r = -ENOMEM;
				goto out;
			}
			names = p;
			cap = ncap;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), cmp_str);
out:
	closedir(d);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return r;
	}
	*out = names;
	*n_out = n;
	return 0;
}

static unsigned depth_of(const char *rel)
{
	unsigned d = rel[0] ? 1 : 0;

	for (const char *p = rel; *p; p++)
		d += *p == '/';
	return d;
}

/* Walks one directory; pushes subdirectories onto q. */
static int walk_dir(int dirfd, const char *rel, dev_t dev, size_t max_entries,
                    fstree_walk_fn fn, void *data, struct fstree_walk_stats *st,
                    struct queue *q, bool *stop)
{
	char **names = NULL;
	size_t n = 0, rl = strlen(rel);
	unsigned depth = depth_of(rel);
	int dfd, r = 0;

	dfd = fstree_open(dirfd, rel, O_RDONLY | O_DIRECTORY, 0);
	if (dfd < 0) {
		st->unreadable++;
		return 0;
	}
	r = read_names(dfd, &names, &n, &st->truncated);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < n && !*stop; i++) {
		struct fstree_entry e;
		struct stat sb;
		size_t nl = strlen(names[i]);
		char *child;

		if (fsname_check_segment(names[i], nl, NULL, NULL, 0) < 0 ||
		    rl + 1 + nl > FSNAME_PATH_MAX) {
			st->invalid_names++;
			continue;
		}
		if (fstatat(dfd, names[i], &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* removed meanwhile */
		if (st->visited >= max_entries) {
			st->truncated = true;
			*stop = true;
			break;
		}
		child = malloc(rl + nl + 2);
		if (!child) {
			r = -ENOMEM;
			goto out;
		}
		snprintf(child, rl + nl + 2, "%s%s%s", rel, rl ? "/" : "",
		         names[i]);
		e.rel = child;
		e.name = child + (rl ? rl + 1 : 0);
		e.st = &sb;
		st->visited++;
		r = fn(data, &e);
		if (r < 0 || r == 1) {
			free(child);
			*stop = true;
			r = r < 0 ? r : 0;
			goto out;
		}
		if (r == FSTREE_WALK_SKIP || !S_ISDIR(sb.st_mode) ||
		    sb.st_dev != dev) {
			free(child);
			r = 0;
			continue;
		}
		if (depth + 1 >= FSNAME_DEPTH_MAX) {
			st->too_deep++;
			free(child);
			continue;
		}
		r = queue_push(q, child);
		if (r < 0) {
			free(child);
			goto out;
		}
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	close(dfd);
	return r;
}

int fstree_walk(int dirfd, const char *rel, size_t max_entries,
                fstree_walk_fn fn, void *data, struct fstree_walk_stats *stats)
{
	struct fstree_walk_stats local = {0};
	struct fstree_walk_stats *st = stats ? stats : &local;
	struct queue q = {0};
	struct stat sb;
	bool stop = false;
	char *first;
	int fd, r;

	memset(st, 0, sizeof(*st));
	fd = fstree_open(dirfd, rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	r = fstat(fd, &sb) < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return r;
	first = strdup(rel ? rel : "");
	if (!first)
		return -ENOMEM;
	r = queue_push(&q, first);
	if (r < 0) {
		free(first);
		return r;
	}
	while (q.head < q.n) {
		char *dir = q.items[q.head++];

		if (!stop && r == 0)
			r = walk_dir(dirfd, dir, sb.st_dev, max_entries, fn,
			             data, st, &q, &stop);
		free(dir);
	}
	free(q.items);
	return r;
}

/* ---- iterative depth-first engine ------------------------------------ */

struct level {
	dev_t dev;
	ino_t ino;
	off_t resume; /* where to go on reading the parent */
};

/* Opens a subdirectory for reading; in removal mode fixes mode 000. */
static int open_subdir(int fd, const char *name, bool fix_mode)
{
	int flags =
	    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
	int c = openat(fd, name, flags);

	if (c < 0 && errno == EACCES && fix_mode) {
		if (fchmodat(fd, name, 0700, AT_SYMLINK_NOFOLLOW) < 0)
			return -EACCES;
		c = openat(fd, name, flags);
	}
	return c < 0 ? -errno : c;
}

/*
 * unlinkat that, when the directory's own mode denies writing to it (code
 * can chmod 0500 its directories; a daemon without CAP_DAC_OVERRIDE then
 * cannot remove their entries), makes the directory 0700 and tries again.
 */
static int unlink_fixing(int fd, const char *name, int flags)
{
	if (unlinkat(fd, name, flags) == 0)
		return 0;
	if (errno != EACCES && errno != EPERM)
		return -1;
	if (fchmod(fd, 0700) < 0) {
		errno = EACCES;
		return -1;
	}
	return unlinkat(fd, name, flags);
}

struct dfs {
	bool remove;
	uint64_t max_bytes, max_files;
	struct fstree_usage *usage;
};

/*
 * Handles one entry of the directory fd. Returns 0 to go on, 1 when the
 * entry is a directory to descend into (its fd in *child), 2 to stop
 * (a measurement limit), or a negative errno.
 */
static int dfs_entry(const struct dfs *w, int fd, dev_t dev,
                     const struct dirent64 *d, int *child)
{
	const char *name = d->d_name;
	unsigned char type = d->d_type;
	struct stat st;
	int c;

	if (!w->remove || type == DT_UNKNOWN) {
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return errno == ENOENT ? 0 : -errno;
		type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
	}
	if (!w->remove) {
		w->usage->bytes += (uint64_t)st.st_blocks * 512;
		w->usage->files++;
		if ((w->max_bytes && w->usage->bytes > w->max_bytes) ||
		    (w->max_files && w->usage->files > w->max_files))
			return 2;
	}
	if (type != DT_DIR) {
		if (w->remove && unlink_fixing(fd, name, 0) < 0 &&
		    errno != ENOENT)
			return -errno;
		return 0;
	}
	if (w->remove) {
		if (unlink_fixing(fd, name, AT_REMOVEDIR) == 0 ||
		    errno == ENOENT)
			return 0;
		if (errno == EBUSY)
			return -EXDEV; /* a mount point */
		if (errno != ENOTEMPTY && errno != EEXIST)
			return -errno;
	}
	c = open_subdir(fd, name, w->remove);
	if (c < 0) {
		if (c == -ENOENT)
			return 0;
		if (!w->remove && c == -EACCES)
			return 0; /* counted, but cannot look inside */
		return c == -ELOOP || c == -ENOTDIR ? -EAGAIN : c;
	}
	if (fstat(c, &st) < 0 || st.st_dev != dev) {
		close(c);
		return w->remove ? -EXDEV : 0;
	}
	*child = c;
	return 1;
}

/* The directories between the walk's root and where it is. */
struct dfs_stack {
	struct level *v;
	size_t depth, cap;
};

/*
 * Reads the directory fd from *pos on and hands each entry to dfs_entry.
 * Returns 0 at the end of the directory, 1 with a subdirectory to descend
 * into in *child (*pos is then where to resume), 2 to stop (a measurement
 * limit), or a negative errno.
 */
static int dfs_read(const struct dfs *w, int fd, dev_t dev, off_t *pos,
                    int *child)
{
	_Alignas(8) char buf[16384];
	int r;

	if (lseek(fd, *pos, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		ssize_t n = getdents64(fd, buf, sizeof(buf));

		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *d =
			    (const struct dirent64 *)(buf + off);

			off += d->d_reclen;
			if (strcmp(d->d_name, ".") == 0 ||
			    strcmp(d->d_name, "..") == 0)
				continue;
			r = dfs_entry(w, fd, dev, d, child);
			if (r == 1)
				*pos = d->d_off;
			if (r != 0)
				return r;
		}
	}
}

/* Records fd, read up to pos, as the directory the walk descends from. */
static int dfs_push(const struct dfs *w, struct dfs_stack *s, int fd, off_t pos)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (s->depth == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 64;
		struct level *p = realloc(s->v, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->v = p;
		s->cap = ncap;
	}
	s->v[s->depth].dev = st.st_dev;
	s->v[s->depth].ino = st.st_ino;
	s->v[s->depth].resume = pos;
	s->depth++;
	if (w->usage && s->depth > w->usage->depth)
		w->usage->depth = (unsigned)s->depth;
	return 0;
}

/*
 * Opens the parent of fd, but only when it is the directory the walk came
 * down from: returns its fd, or -EAGAIN when the tree was moved under us.
 */
static int dfs_climb(int fd, const struct level *from)
{
	struct stat st;
	int parent = openat(fd, "..",
	                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC |
	                        O_NONBLOCK);

	if (parent < 0)
		return -errno;
	if (fstat(parent, &st) < 0 || st.st_dev != from->dev ||
	    st.st_ino != from->ino) {
		close(parent);
		return -EAGAIN;
	}
	return parent;
}

/* Empties (remove) or measures the directory fd; takes ownership of fd. */
static int dfs_run(const struct dfs *w, int fd)
{
	struct dfs_stack s = {0};
	unsigned long long descents = 0;
	struct stat st;
	off_t pos = 0;
	dev_t dev;
	int r;

	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	dev = st.st_dev;
	for (;;) {
		int child = -1;

		r = dfs_read(w, fd, dev, &pos, &child);
		if (r < 0)
			goto out;
		if (r == 2) {
			r = 0;
			goto out;
		}
		if (r == 1) {
			r = ++descents > DFS_DESCENTS_MAX
			        ? -EAGAIN
			        : dfs_push(w, &s, fd, pos);
			if (r < 0) {
				close(child);
				goto out;
			}
			close(fd);
			fd = child;
			pos = 0;
			continue;
		}
		if (s.depth == 0)
			break;
		r = dfs_climb(fd, &s.v[s.depth - 1]);
		if (r < 0)
			goto out;
		close(fd);
		fd = r;
		s.depth--;
		/* Removal rereads: what is left is what failed. */
		pos = w->remove ? 0 : s.v[s.depth].resume;
	}
out:
	free(s.v);
	close(fd);
	return r;
}

int fstree_remove(int parentfd, const char *name)
{
	struct dfs w = {.remove = true};
	struct stat st;
	int fd, r;

	if (fstatat(parentfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(parentfd, name, 0) < 0 && errno != ENOENT
		           ? -errno
		           : 0;
	if (unlinkat(parentfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	if (errno == EBUSY)
		return -EXDEV;
	fd = open_subdir(parentfd, name, true);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	r = dfs_run(&w, fd);
	if (r < 0)
		return r;
	if (unlinkat(parentfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int fstree_measure(int dirfd, uint64_t max_bytes, uint64_t max_files,
                   struct fstree_usage *out)
{
	struct dfs w = {.remove = false,
	                .max_bytes = max_bytes,
	                .max_files = max_files,
	                .usage = out};
	int fd;

	memset(out, 0, sizeof(*out));
	fd =
	    openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	return dfs_run(&w, fd);
}
