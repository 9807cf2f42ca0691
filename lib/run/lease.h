/* SPDX-License-Identifier: MIT */
/*
 * lease: which replica may run a conversation's code, when several daemon
 * replicas each drive their own node's engine (warm sessions on more than
 * one host, docs/deployment.md). One row per conversation (its workspace
 * name, never the raw conversation id) in the shared store: the owner
 * replica, an epoch that grows with every change of owner, and an expiry
 * (wall clock, ms) that the owner renews every third of
 * MCP_CONVERSATION_LEASE_SECONDS
 * while it holds the conversation (a run in progress, or a warm session
 * alive on its node). Another replica takes a lease over only when it has
 * expired (its owner died or was cut off) or was released; while it is
 * live, the other replica marks itself as wanting it and waits, and the
 * owner hands the conversation over (its state is saved after every run;
 * it ends its boxes once the last save is written, then releases). A
 * replica checks its lease before every run (lease_acquire): one that lost
 * it never runs, and one that gets a lease back from another replica
 * first drops whatever it kept locally of the conversation, which is older
 * than what the other replica saved. A run already going when its replica
 * is cut off from the store is stopped by the replica itself (fencing,
 * lease_set_fence): once two thirds of a lease have passed since the
 * store last confirmed it, before any other replica may take it over.
 *
 * The module owns the table lease_conversations (LEASE_MIGRATION_1).
 * Times are each replica's wall clock: keep the replicas' clocks in step
 * (NTP), well within the lease.
 *
 * Errors: negative errno from the store (-EIO, -EBUSY, -ENOSPC; logged
 * there), -ENOMEM, -EAGAIN (another replica holds the conversation).
 *
 * Threads: every function is thread-safe; each is one short transaction
 * of the store, and the local table of runs in progress has a mutex.
 */
#ifndef MCPSD_LEASE_H
#define MCPSD_LEASE_H

#include <stdbool.h>

#include "store/store.h"
#include "util/cron.h"

/* Schema step of the lease module (lib/schema.c). Never edit: add one. */
#define LEASE_MIGRATION_1                                                      \
	"CREATE TABLE lease_conversations ("                                   \
	"  name TEXT PRIMARY KEY,"                                             \
	"  owner TEXT NOT NULL,"                                               \
	"  epoch INTEGER NOT NULL,"                                            \
	"  expires_ms INTEGER NOT NULL,"                                       \
	"  wanted_by TEXT NOT NULL DEFAULT '',"                                \
	"  wanted_ms INTEGER NOT NULL DEFAULT 0);"                             \
	"CREATE INDEX lease_conversations_owner ON lease_conversations "       \
	"(owner);"
#define LEASE_MIGRATION_1_PG                                                   \
	"CREATE TABLE lease_conversations ("                                   \
	"  name TEXT PRIMARY KEY,"                                             \
	"  owner TEXT NOT NULL,"                                               \
	"  epoch BIGINT NOT NULL,"                                             \
	"  expires_ms BIGINT NOT NULL,"                                        \
	"  wanted_by TEXT NOT NULL DEFAULT '',"                                \
	"  wanted_ms BIGINT NOT NULL DEFAULT 0);"                              \
	"CREATE INDEX lease_conversations_owner ON lease_conversations "       \
	"(owner);"

#define LEASE_NAME_MAX 128 /* a workspace name fits */
#define LEASE_OWNER_MAX 64

struct lease;

/* What lease_acquire found. */
struct lease_grant {
	long long epoch;
	/* The conversation was last held by another replica: what this one
	 * kept locally is stale; from says which, lost whether its lease
	 * expired (it stopped answering) rather than being handed over. */
	bool moved;
	bool lost;
	char from[LEASE_OWNER_MAX];
};

/*
 * A lease table for replica owner (MCP_REPLICA_NAME, not empty) in st
 * (borrowed; must outlive it), leases of lease_ms. Caller owns; free with
 * lease_destroy. -EINVAL, -ENOMEM.
 */
__attribute__((warn_unused_result)) int lease_create(struct store *st,
                                                     const char *owner,
                                                     long long lease_ms,
                                                     struct lease **out);
void lease_destroy(struct lease *l);

/* The wall clock in ms (what expiry is measured on). */
long long lease_now_ms(void);

/*
 * Takes or renews the lease of conversation name for a run, at now_ms, and
 * counts a run in progress on it (end it with lease_done, whatever the
 * result). 0 with *g filled; -EAGAIN when another replica holds it live
 * (this one is recorded as wanting it: *g->from names the owner; wait and
 * try again), or a store error.
 */
__attribute__((warn_unused_result)) int lease_acquire(struct lease *l,
                                                      const char *name,
                                                      long long now_ms,
                                                      struct lease_grant *g);

/* A run of name that lease_acquire counted is over. */
void lease_done(struct lease *l, const char *name);

/*
 * Fencing: a thread of the lease's own (no store call in it, so a store
 * that hangs cannot hold it up) looks every twelfth of a lease at the runs
 * in progress; a run whose lease the store has not confirmed (taken by
 * lease_acquire, renewed by lease_renew) for LEASE_FENCE_MS(lease_ms) gets
 * fire(handle) once, with the handle lease_watch gave it: the run must
 * stop, since once the lease runs out another replica may take the
 * conversation over. The first call starts the thread; lease_destroy
 * stops it. fire runs with the lease's mutex held: set a flag, no more.
 * 0 or -errno (the thread could not start).
 */
#define LEASE_FENCE_MS(lease_ms) ((lease_ms)*2 / 3)
typedef void (*lease_fire_fn)(void *handle);
__attribute__((warn_unused_result)) int lease_set_fence(struct lease *l,
                                                        lease_fire_fn fire);
/* Gives the run of name that lease_acquire counted its handle (a run's
 * cancel); lease_unwatch takes it back before the handle is freed. */
void lease_watch(struct lease *l, const char *name, void *handle);
void lease_unwatch(struct lease *l, const char *name, void *handle);

/*
 * What the replica keeps of a conversation, asked by lease_job: 0 nothing
 * (the lease goes), 1 an idle warm session, 2 a busy one.
 */
typedef int (*lease_holds_fn)(void *arg, const char *name);
/*
 * Hands conversation name over: ends its idle warm sessions once their
 * last state save is written. 0 done, -EBUSY when one became busy.
 */
typedef int (*lease_hand_off_fn)(void *arg, const char *name);
void lease_set_holder(struct lease *l, lease_holds_fn holds,
                      lease_hand_off_fn hand_off, void *arg);

/*
 * Renews this replica's leases (one statement). For lease_job and before
 * the first run. 0 or a store error.
 */
__attribute__((warn_unused_result)) int lease_renew(struct lease *l,
                                                    long long now_ms);

/*
 * Housekeeping (cron.h). lease_job_renew (CRON_PROMPT, every
 * LEASE_RENEW_INTERVAL_MS of the lease's seconds) renews the leases.
 * lease_job (every second, CRON_SLOW: a hand-over waits on the engine)
 * releases those of conversations the replica no longer holds and hands
 * over those another replica wants.
 */
#define LEASE_RENEW_INTERVAL_MS(s) ((s)*1000u / 3)
enum cron_next lease_job_renew(void *arg, long long deadline_ms);
enum cron_next lease_job(void *arg, long long deadline_ms);

/*
 * Releases every lease this replica holds (a drain: call after the warm
 * sessions ended). Returns how many, or a store error.
 */
int lease_release_all(struct lease *l);

struct lease_stats {
	unsigned long long acquired;  /* leases taken (new or over) */
	unsigned long long handovers; /* given to a replica that asked */
	unsigned long long moved_in;  /* taken from another replica */
	unsigned long long lost_in;   /* of those, after its lease expired */
	unsigned long long waits;     /* runs that waited for another owner */
	unsigned long long fenced;    /* runs stopped: lease not confirmed */
	unsigned held;                /* at the last renewal */
};
void lease_stats(struct lease *l, struct lease_stats *out);

/*
 * Registers the replica's conversation metrics in s (borrowed; must
 * outlive l): mcpsd_conversations_held (leases held at the last renewal),
 * mcpsd_conversation_handovers_total{direction="out"|"in"} (given to a
 * replica that asked; taken from one that handed over),
 * mcpsd_conversation_restores_total{after="handover"|"server_lost"}
 * (conversations taken from another replica, whose next run loads the
 * saved state here), mcpsd_conversation_waits_total (runs that found
 * another replica holding their conversation and waited) and
 * mcpsd_conversation_fenced_total (runs this replica stopped because the
 * store had not confirmed their lease in time: it was cut off).
 */
struct stats;
void lease_set_stats(struct lease *l, struct stats *s);

#endif
