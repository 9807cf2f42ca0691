/* SPDX-License-Identifier: MIT */
/*
 * loopfs: a file system image per workspace, attached to a loop device and
 * mounted nosuid,nodev,noexec. The image's size bounds the bytes and its
 * inode count bounds the files that code in a container can create, which
 * a check after the run cannot do (one run made 107,124 files in 5 s). The
 * images are formatted by mkfs.ext4 (e2fsprogs, run without a shell and
 * with a fixed environment); attaching and mounting use the loop-control
 * and mount system calls directly, so this needs root (CAP_SYS_ADMIN) and
 * /dev/loop-control with the /dev/loopN nodes.
 *
 * Stateless: callers serialize the operations on one image. Errors carry a
 * message for an operator in err.
 */
#ifndef MCPSD_LOOPFS_H
#define MCPSD_LOOPFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Creates the sparse image file image (which must not exist) of size bytes
 * and formats it as ext4 with about inodes inodes, no blocks reserved for
 * root, and its root directory owned by uid:gid. On failure the image is
 * removed and a negative errno returned with the reason in err.
 */
__attribute__((warn_unused_result)) int
loopfs_format(const char *image, uint64_t size, unsigned inodes, uid_t uid,
              gid_t gid, char *err, size_t errlen);

/*
 * Mounts image at the directory target (not followed if a symlink) with
 * nosuid, nodev and noexec, on a free loop device that detaches itself at
 * unmount, or on the loop device the image is already attached to (a mount
 * that outlived an earlier instance), so one image is never attached twice.
 * fresh: the caller just made the image (loopfs_format), so no loop device
 * can hold it and the search of every loop device (its cost grows with the
 * mounts on the host) is left out. Returns 0, or a negative errno with the
 * reason in err.
 */
__attribute__((warn_unused_result)) int loopfs_mount(const char *image,
                                                     const char *target,
                                                     bool fresh, char *err,
                                                     size_t errlen);

/*
 * Unmounts target (not following a symlink). Returns 0, -EBUSY while
 * something still uses it (an open file, a container), -EINVAL when it is
 * not a mount point, or another negative errno.
 */
__attribute__((warn_unused_result)) int loopfs_umount(const char *target);

/*
 * Whether the directory name in parentfd is the root of a mount. Returns
 * 1, 0, or a negative errno (-ENOENT when absent).
 */
__attribute__((warn_unused_result)) int loopfs_is_mountpoint(int parentfd,
                                                             const char *name);

/*
 * Whether mounts made under path propagate to other mount namespaces (its
 * mount is "shared" in /proc/self/mountinfo). Returns 1, 0, or a negative
 * errno when it cannot tell. The Docker host sees a workspace mount made
 * by a containerized daemon only when this is 1.
 */
__attribute__((warn_unused_result)) int loopfs_propagates(const char *path);

/*
 * Whether a process named dockerd is visible and shares this process's
 * mount namespace: then mounts made here are seen by the engine whatever
 * their propagation.
 */
bool loopfs_engine_shares_mounts(void);

#endif
