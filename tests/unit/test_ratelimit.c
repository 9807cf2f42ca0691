/* SPDX-License-Identifier: MIT */
/* Token buckets: a burst, refusal with a retry time, keys apart, eviction. */
#include <unistd.h>

#include "tap.h"
#include "util/ratelimit.h"

int main(void)
{
	struct ratelimit *rl = ratelimit_create(2, 3, 0.5);
	unsigned wait = 0;
	int taken = 0;

	ok(rl != NULL, "created");
	for (int i = 0; i < 10; i++)
		taken += ratelimit_take(rl, "a", &wait);
	is_int(taken, 3, "a burst of three, then refusals");
	ok(wait >= 1 && wait <= 2, "retry after one to two seconds (%u)", wait);
	ok(!ratelimit_peek(rl, "a", NULL), "peek sees the empty bucket");
	ok(ratelimit_take(rl, "b", NULL), "another key has its own bucket");
	ok(ratelimit_take(rl, "c", NULL), "a third key evicts the idlest");
	ratelimit_forget(rl, "c");
	ok(ratelimit_peek(rl, "c", NULL), "forget refills");
	ratelimit_destroy(rl);
	rl = ratelimit_create(4, 1, 20);
	ok(ratelimit_take(rl, "", NULL) && !ratelimit_take(rl, "", NULL),
	   "one token");
	usleep(150 * 1000);
	ok(ratelimit_take(rl, "", NULL), "refilled over time");
	ratelimit_destroy(rl);
	ok(ratelimit_create(0, 1, 1) == NULL, "no keys: refused");
	return tap_done();
}
