/* SPDX-License-Identifier: MIT */
/*
 * ratelimit: a small table scanned linearly. The callers are the OAuth
 * endpoints a person or a client uses a few times a day, and a scan of a few
 * thousand short keys costs microseconds, so a hash table would buy
 * nothing. Time is the monotonic clock.
 */
#include "util/ratelimit.h"

#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/mono.h"

struct bucket {
	char key[RATELIMIT_KEY_MAX + 1];
	double tokens;
	long long at_ms; /* when tokens was computed */
};

struct ratelimit {
	pthread_mutex_t mu;
	double burst, per_ms;
	size_t n, max;
	struct bucket b[];
};

struct ratelimit *ratelimit_create(size_t max_keys, double burst,
                                   double per_second)
{
	struct ratelimit *rl;

	if (max_keys == 0 || burst < 1 || per_second <= 0)
		return NULL;
	rl = calloc(1, sizeof(*rl) + max_keys * sizeof(rl->b[0]));
	if (!rl)
		return NULL;
	pthread_mutex_init(&rl->mu, NULL);
	rl->burst = burst;
	rl->per_ms = per_second / 1000.0;
	rl->max = max_keys;
	return rl;
}

void ratelimit_destroy(struct ratelimit *rl)
{
	if (!rl)
		return;
	pthread_mutex_destroy(&rl->mu);
	free(rl);
}

/* The key's bucket, refilled to now; created (full) when absent. */
static struct bucket *find(struct ratelimit *rl, const char *key, bool create)
{
	char k[RATELIMIT_KEY_MAX + 1];
	long long now = mono_ms();
	struct bucket *b = NULL, *oldest = NULL;

	snprintf(k, sizeof(k), "%s", key);
	for (size_t i = 0; i < rl->n; i++) {
		if (strcmp(rl->b[i].key, k) == 0) {
			b = &rl->b[i];
			break;
		}
		if (!oldest || rl->b[i].at_ms < oldest->at_ms)
			oldest = &rl->b[i];
	}
	if (!b) {
		if (!create)
			return NULL;
		b = rl->n < rl->max ? &rl->b[rl->n++] : oldest;
		memcpy(b->key, k, sizeof(k));
		b->tokens = rl->burst;
		b->at_ms = now;
		return b;
	}
	b->tokens += (double)(now - b->at_ms) * rl->per_ms;
	if (b->tokens > rl->burst)
		b->tokens = rl->burst;
	b->at_ms = now;
	return b;
}

static unsigned wait_s(const struct ratelimit *rl, const struct bucket *b)
{
	double ms = (1.0 - b->tokens) / rl->per_ms;
	double s = ceil(ms / 1000.0);

	return s < 1 ? 1 : s > 86400 ? 86400 : (unsigned)s;
}

static bool check(struct ratelimit *rl, const char *key, bool take,
                  unsigned *retry_after_s)
{
	struct bucket *b;
	bool ok;

	if (retry_after_s)
		*retry_after_s = 0;
	pthread_mutex_lock(&rl->mu);
	b = find(rl, key, true);
	ok = b->tokens >= 1.0;
	if (ok && take)
		b->tokens -= 1.0;
	if (!ok && retry_after_s)
		*retry_after_s = wait_s(rl, b);
	pthread_mutex_unlock(&rl->mu);
	return ok;
}

bool ratelimit_take(struct ratelimit *rl, const char *key,
                    unsigned *retry_after_s)
{
	return check(rl, key, true, retry_after_s);
}

bool ratelimit_peek(struct ratelimit *rl, const char *key,
                    unsigned *retry_after_s)
{
	return check(rl, key, false, retry_after_s);
}

void ratelimit_forget(struct ratelimit *rl, const char *key)
{
	struct bucket *b;

	pthread_mutex_lock(&rl->mu);
	b = find(rl, key, false);
	if (b)
		b->tokens = rl->burst;
	pthread_mutex_unlock(&rl->mu);
}
