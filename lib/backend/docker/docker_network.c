/* SPDX-License-Identifier: MIT */
/*
 * docker_network: the Engine API's network endpoints (create, remove,
 * connect, disconnect) for the egress networks of runs with network
 * (lib/egress); declared in docker.h, thread-safe like the rest of it.
 * Kept apart from docker.c, which holds containers, images and the client.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend/docker/docker.h"
#include "backend/docker/docker_internal.h"

cJSON *docker_network_body(const struct docker_network_opts *o)
{
	cJSON *b = cJSON_CreateObject(), *ipam, *cfgs, *c, *opts, *labels;

	if (!b || !cJSON_AddStringToObject(b, "Name", o->name) ||
	    !cJSON_AddStringToObject(b, "Driver", "bridge") ||
	    !cJSON_AddBoolToObject(b, "CheckDuplicate", 1) ||
	    !cJSON_AddBoolToObject(b, "Internal", o->internal) ||
	    !cJSON_AddBoolToObject(b, "Attachable", 0) ||
	    !cJSON_AddBoolToObject(b, "EnableIPv6", 0))
		goto fail;
	ipam = cJSON_AddObjectToObject(b, "IPAM");
	cfgs = ipam ? cJSON_AddArrayToObject(ipam, "Config") : NULL;
	c = cJSON_CreateObject();
	if (!cfgs || !c || !cJSON_AddItemToArray(cfgs, c)) {
		cJSON_Delete(c);
		goto fail;
	}
	if (!cJSON_AddStringToObject(c, "Subnet", o->subnet) ||
	    (o->gateway && !cJSON_AddStringToObject(c, "Gateway", o->gateway)))
		goto fail;
	opts = cJSON_AddObjectToObject(b, "Options");
	if (!opts ||
	    (o->no_host_address &&
	     !cJSON_AddStringToObject(
	         opts, "com.docker.network.bridge.inhibit_ipv4", "true")))
		goto fail;
	labels = cJSON_AddObjectToObject(b, "Labels");
	if (!labels)
		goto fail;
	for (size_t i = 0; i < o->n_labels; i++)
		if (!cJSON_AddStringToObject(labels, o->labels[i].key,
		                             o->labels[i].value))
			goto fail;
	return b;
fail:
	cJSON_Delete(b);
	return NULL;
}

/* method path with the JSON body b (taken: freed here), answer unused. */
static int dn_call(struct docker *d, const char *method, const char *path,
                   cJSON *b, char *err, size_t errlen)
{
	char *txt = b ? cJSON_PrintUnformatted(b) : NULL;
	int r;

	cJSON_Delete(b);
	if (!txt) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r = docker_request(d, method, path, txt, 0, NULL, err, errlen);
	cJSON_free(txt);
	return r;
}

int docker_network_create(struct docker *d, const struct docker_network_opts *o,
                          char *err, size_t errlen)
{
	int r;

	if (!docker_id_ok(o->name))
		return docker_bad_id("network name", err, errlen);
	r = dn_call(d, "POST", "/networks/create", docker_network_body(o), err,
	            errlen);
	if (r < 0 && strstr(err, "overlaps"))
		return -EADDRINUSE;
	if (r < 0 && strstr(err, "already exists"))
		return -EBUSY;
	return r;
}

int docker_network_remove(struct docker *d, const char *name, char *err,
                          size_t errlen)
{
	char path[256];

	if (!docker_id_ok(name))
		return docker_bad_id("network name", err, errlen);
	snprintf(path, sizeof(path), "/networks/%s", name);
	return docker_request(d, "DELETE", path, NULL, 0, NULL, err, errlen);
}

/* POST /networks/{name}/<what> for container, with the rest of the body. */
static int dn_endpoint(struct docker *d, const char *name, const char *what,
                       cJSON *b, const char *container, char *err,
                       size_t errlen)
{
	char path[256];

	if (!b || !docker_id_ok(name) || !docker_id_ok(container)) {
		cJSON_Delete(b);
		if (!b) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		return docker_bad_id("network or container name", err, errlen);
	}
	snprintf(path, sizeof(path), "/networks/%s/%s", name, what);
	if (!cJSON_AddStringToObject(b, "Container", container)) {
		cJSON_Delete(b);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return dn_call(d, "POST", path, b, err, errlen);
}

int docker_network_connect(struct docker *d, const char *name,
                           const char *container, const char *ip,
                           const char *alias, char *err, size_t errlen)
{
	cJSON *b = cJSON_CreateObject(), *ep = NULL, *ipam, *al;

	if (b && (ip || alias))
		ep = cJSON_AddObjectToObject(b, "EndpointConfig");
	if (ep && ip) {
		ipam = cJSON_AddObjectToObject(ep, "IPAMConfig");
		if (!ipam || !cJSON_AddStringToObject(ipam, "IPv4Address", ip))
			ep = NULL;
	}
	if (ep && alias) {
		al = cJSON_AddArrayToObject(ep, "Aliases");
		if (!al || !cJSON_AddItemToArray(al, cJSON_CreateString(alias)))
			ep = NULL;
	}
	if (b && (ip || alias) && !ep) {
		cJSON_Delete(b);
		b = NULL;
	}
	return dn_endpoint(d, name, "connect", b, container, err, errlen);
}

int docker_network_disconnect(struct docker *d, const char *name,
                              const char *container, char *err, size_t errlen)
{
	cJSON *b = cJSON_CreateObject();

	if (b && !cJSON_AddBoolToObject(b, "Force", 1)) {
		cJSON_Delete(b);
		b = NULL;
	}
	return dn_endpoint(d, name, "disconnect", b, container, err, errlen);
}
