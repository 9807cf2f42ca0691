/* SPDX-License-Identifier: MIT */
/*
 * docker_egress: the egress proxy container and the per-run egress
 * networks; see docker_egress.h. No state of its own.
 */
#include "backend/docker/docker_egress.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend/docker/docker_internal.h"
#include "util/log.h"

#define DE_MEMORY_BYTES (256LL * 1024 * 1024)
#define DE_PIDS 256

static int de_proxy_create(struct docker *d,
                           const struct backend_egress_proxy *p,
                           char id[DOCKER_ID_LEN + 1], char *err, size_t errlen)
{
	static const char *const cmd[] = {"squid", "-N", "-f",
	                                  "/egress/squid.conf"};
	static const char *const capdrop[] = {"ALL"};
	static const char *const secopt[] = {"no-new-privileges:true"};
	static const struct docker_kv tmpfs[] = {
	    {"/run", "rw,noexec,nosuid,nodev,size=8m"},
	    {"/var/spool/squid", "rw,noexec,nosuid,nodev,size=8m"},
	    {"/var/log/squid", "rw,noexec,nosuid,nodev,size=8m"},
	    {"/var/cache/squid", "rw,noexec,nosuid,nodev,size=8m"}};
	const struct docker_kv labels[] = {{"sandbox.egress", "proxy"},
	                                   {"sandbox.owner", p->instance}};
	const struct docker_mount mounts[] = {
	    {p->dir, "/egress", true, false},
	    {p->log_dir, "/egress/log", false, false}};
	struct docker_create_opts o;
	char user[32];

	snprintf(user, sizeof(user), "%u:%u", p->uid, p->uid);
	memset(&o, 0, sizeof(o));
	o.image = p->image;
	o.cmd = cmd;
	o.n_cmd = 4;
	o.labels = labels;
	o.n_labels = 2;
	o.user = user;
	o.memory_bytes = o.memory_swap_bytes = DE_MEMORY_BYTES;
	o.pids_limit = DE_PIDS;
	o.network_mode = p->network;
	o.readonly_rootfs = true;
	o.init = true;
	o.ipc_mode = "private";
	o.tmpfs = tmpfs;
	o.n_tmpfs = sizeof(tmpfs) / sizeof(tmpfs[0]);
	o.cap_drop = capdrop;
	o.n_cap_drop = 1;
	o.security_opt = secopt;
	o.n_security_opt = 1;
	o.mounts = mounts;
	o.n_mounts = 2;
	o.log_driver = "none";
	return docker_container_create(d, p->name, &o, id, err, errlen);
}

/*
 * Removes the egress networks an earlier run of this daemon (instance)
 * left, once their proxy is gone (its boxes went with the reaper).
 */
static void de_sweep_networks(struct docker *d, const char *instance)
{
	char label[128], why[512];
	cJSON *nets = NULL, *n;

	snprintf(label, sizeof(label), "sandbox.owner=%s", instance);
	if (docker_networks_list(d, label, &nets, why, sizeof(why)) < 0) {
		log_warnx("egress: listing leftover networks: %s", why);
		return;
	}
	cJSON_ArrayForEach (n, nets) {
		const char *name = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(n, "Name"));
		const char *kind =
		    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		        cJSON_GetObjectItemCaseSensitive(n, "Labels"),
		        "sandbox.egress"));

		if (!name || !kind || strcmp(kind, "network") != 0)
			continue;
		if (docker_network_remove(d, name, why, sizeof(why)) < 0)
			log_warnx("egress: removing leftover network %s: %s",
			          name, why);
		else
			log_info("egress: removed leftover network %s", name);
	}
	cJSON_Delete(nets);
}

int docker_egress_proxy_start(struct docker *d,
                              const struct backend_egress_proxy *p, char *err,
                              size_t errlen)
{
	char id[DOCKER_ID_LEN + 1], why[512];
	int r;

	r = docker_container_remove(d, p->name, why, sizeof(why));
	if (r < 0 && r != -ENOENT)
		log_warnx("egress: removing the old proxy %s: %s", p->name,
		          why);
	de_sweep_networks(d, p->instance);
	r = de_proxy_create(d, p, id, why, sizeof(why));
	if (r == -ENOENT || (r < 0 && strstr(why, "No such image"))) {
		snprintf(err, errlen,
		         "the egress proxy image %s is not on the engine (%s); "
		         "build it with runners/build.sh --egress, or set "
		         "SANDBOX_EGRESS_IMAGE",
		         p->image, why);
		return -ENOENT;
	}
	if (r == 0)
		r = docker_container_start(d, id, why, sizeof(why));
	if (r < 0) {
		snprintf(err, errlen, "cannot start the egress proxy: %s", why);
		return r;
	}
	return 0;
}

void docker_egress_proxy_stop(struct docker *d, const char *name)
{
	char why[512];
	int r = docker_container_remove(d, name, why, sizeof(why));

	if (r < 0 && r != -ENOENT)
		log_warnx("egress: removing the proxy %s: %s", name, why);
}

int docker_egress_net_open(struct docker *d, const struct backend_egress_net *n,
                           char *err, size_t errlen)
{
	const struct docker_kv labels[] = {{"sandbox.egress", "network"},
	                                   {"sandbox.owner", n->instance}};
	const struct docker_network_opts o = {.name = n->name,
	                                      .subnet = n->subnet,
	                                      .gateway = n->gateway,
	                                      .internal = true,
	                                      .no_host_address = true,
	                                      .labels = labels,
	                                      .n_labels = 2};
	char why[512];
	int r;

	r = docker_network_create(d, &o, err, errlen);
	if (r == -EBUSY)
		r = -EADDRINUSE;
	if (r < 0)
		return r;
	r = docker_network_connect(d, n->name, n->proxy, n->proxy_ip,
	                           BACKEND_EGRESS_PROXY_ALIAS, err, errlen);
	if (r < 0) {
		if (docker_network_remove(d, n->name, why, sizeof(why)) < 0)
			log_warnx("egress: removing network %s: %s", n->name,
			          why);
		return r == -ENOENT ? -EIO : r;
	}
	return 0;
}

/*
 * Takes every container off the network: the proxy, and a run's box the
 * engine still counts as on it (its removal is queued, not done).
 */
static void de_empty_network(struct docker *d, const char *name)
{
	char path[256], why[512];
	cJSON *net = NULL, *c;

	snprintf(path, sizeof(path), "/networks/%s", name);
	if (docker_request(d, "GET", path, NULL, 0, &net, why, sizeof(why)) <
	    0) {
		log_warnx("egress: looking at network %s: %s", name, why);
		return;
	}
	cJSON_ArrayForEach (
	    c, cJSON_GetObjectItemCaseSensitive(net, "Containers")) {
		int r;

		if (!c->string || !docker_id_ok(c->string))
			continue;
		r = docker_network_disconnect(d, name, c->string, why,
		                              sizeof(why));
		if (r < 0 && r != -ENOENT)
			log_warnx("egress: taking %.12s off %s: %s", c->string,
			          name, why);
	}
	cJSON_Delete(net);
}

void docker_egress_net_close(struct docker *d,
                             const struct backend_egress_net *n)
{
	char why[512];
	int r;

	de_empty_network(d, n->name);
	r = docker_network_remove(d, n->name, why, sizeof(why));
	if (r < 0 && r != -ENOENT)
		log_warnx("egress: removing network %s: %s", n->name, why);
}
