/* SPDX-License-Identifier: MIT */
/*
 * ratelimit: token buckets by key (a client address, a tenant), for
 * refusing floods and guessing: each key's bucket holds up to `burst`
 * tokens and regains `per_second` of them a second. The table holds at most
 * max_keys keys; when full, the key that was idle longest is forgotten
 * (a forgotten key starts again with a full bucket, so the bound is on
 * memory, not on what an attacker with many addresses can do: pair a
 * per-address limiter with a global one, the key ""). Thread-safe.
 */
#ifndef MCPSD_RATELIMIT_H
#define MCPSD_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>

#define RATELIMIT_KEY_MAX 64

struct ratelimit;

/* NULL when out of memory. Free with ratelimit_destroy. */
struct ratelimit *ratelimit_create(size_t max_keys, double burst,
                                   double per_second);

/* NULL-safe. */
void ratelimit_destroy(struct ratelimit *rl);

/*
 * Takes one token from key's bucket: true when there was one. On false,
 * *retry_after_s (if not NULL) is the wait until one is back, at least 1.
 * Keys longer than RATELIMIT_KEY_MAX are cut to it.
 */
bool ratelimit_take(struct ratelimit *rl, const char *key,
                    unsigned *retry_after_s);

/* Whether key's bucket has a token, without taking it. */
bool ratelimit_peek(struct ratelimit *rl, const char *key,
                    unsigned *retry_after_s);

/* Forgets key (its bucket is full again), e.g. after a success. */
void ratelimit_forget(struct ratelimit *rl, const char *key);

#endif
