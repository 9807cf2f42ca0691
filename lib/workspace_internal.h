/* SPDX-License-Identifier: MIT */
/*
 * workspace_internal: helpers shared by workspace.c and workspace_io.c, the
 * two halves of the workspace module. Not part of its interface.
 */
#ifndef MCPSD_WORKSPACE_INTERNAL_H
#define MCPSD_WORKSPACE_INTERNAL_H

#include <stddef.h>

/* Writes a message for the caller into err (which may be NULL). */
void workspace_say(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* workspace_say(), then returns code (a negative errno). */
int workspace_fail(int code, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
