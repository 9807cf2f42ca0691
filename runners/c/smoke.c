/* build.sh smoke test: run as /sandbox/main.c through sandbox.command. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *square(void *arg)
{
	long *v = arg;

	*v *= *v;
	return NULL;
}

int main(void)
{
	pthread_t t;
	long v = 12;
	FILE *f;
	char buf[64];

	if (pthread_create(&t, NULL, square, &v) != 0 || pthread_join(t, NULL) != 0 || v != 144)
		return 1;
	if (fabs(sqrt(2.0) * sqrt(2.0) - 2.0) > 1e-12)
		return 2;
	f = fopen("/data/smoke.txt", "w");
	if (!f || fprintf(f, "%ld\n", v) < 0 || fclose(f) != 0)
		return 3;
	f = fopen("/data/smoke.txt", "r");
	if (!f || !fgets(buf, sizeof(buf), f) || strcmp(buf, "144\n") != 0)
		return 4;
	fclose(f);
	printf("uid %u cwd %s\n", (unsigned)getuid(), getcwd(buf, sizeof(buf)));
	printf("smoke ok\n");
	return 0;
}
