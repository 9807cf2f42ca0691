/* SPDX-License-Identifier: MIT */
/*
 * mono: the monotonic clock every deadline, timeout and age in the daemon is
 * measured on, and condition variables that wait against it (so a change of
 * the wall clock never shortens or stretches a wait). Thread-safe.
 */
#ifndef MCPSD_UTIL_MONO_H
#define MCPSD_UTIL_MONO_H

#include <pthread.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds. */
long long mono_ms(void);

/* The same in microseconds. */
long long mono_us(void);

/* CLOCK_MONOTONIC in whole seconds. */
time_t mono_s(void);

/* Sets *ts to ms milliseconds from now on CLOCK_MONOTONIC (ms >= 0). */
void mono_deadline(struct timespec *ts, long long ms);

/* Sets *ts to the absolute monotonic time at_ms (as from mono_ms). */
void mono_timespec(struct timespec *ts, long long at_ms);

/*
 * Initializes *c to wait against CLOCK_MONOTONIC, for use with
 * mono_deadline and pthread_cond_timedwait. Destroy with
 * pthread_cond_destroy.
 */
void mono_cond_init(pthread_cond_t *c);

#endif
