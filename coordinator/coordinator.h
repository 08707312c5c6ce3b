/*
 * The coordinator process: configuration and the runtime that ties the subsystems
 * together (membership.c, assign.c, epoch.c, store.c, leader.c, presence.c, commit.c,
 * restart.c, admin.c). One main thread runs everything in a loop (job.c, pipeline.c): it
 * drains worker messages, drives the election, sends barriers, records and commits
 * completed epochs. The admin HTTP server runs on NNG threads and only reads a status
 * snapshot that the loop publishes under a mutex.
 */
#ifndef CDC_COORDINATOR_COORDINATOR_H
#define CDC_COORDINATOR_COORDINATOR_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/options.h"
#include "common/config.h"
#include "common/diskfull.h"
#include "common/etcd.h"
#include "common/health.h"
#include "common/http.h"
#include "common/metrics.h"
#include "common/msg.h"
#include "coordinator/admission.h"
#include "coordinator/checkpoint.h"
#include "coordinator/commit.h"
#include "coordinator/epoch.h"
#include "coordinator/history.h"
#include "coordinator/leader.h"
#include "coordinator/maintenance.h"
#include "coordinator/membership.h"
#include "coordinator/staged_check.h"
#include "coordinator/offsets_base.h"
#include "coordinator/presence.h"
#include "coordinator/progress.h"
#include "coordinator/restart.h"
#include "coordinator/store.h"
#include "coordinator/tableset.h"
#include "coordinator/unconsumed.h"
#include "coordinator/watermarks.h"

typedef struct cdc_coord_config {
    char *id;
    char *job;
    cdc_etcd_options_t etcd;
    char *listen;
    char *advertise;
    char *http;
    cdc_tls_options_t tls; /* tls+tcp:// --listen and --http-tls (common/tls.h) */
    int64_t liveness_timeout_ms;
    char *http_token;      /* bearer tokens of the admin API (http.h); NULL = none */
    bool http_token_reads; /* GET endpoints need the token too */
    bool insecure;         /* --insecure: missing secrets waived */
    char *kafka;           /* the source topics' brokers, for the live lag (NULL = from acks) */
    char *kafka_properties;
    char *warehouse;
    cdc_s3_options_t s3;
    int64_t commit_interval_ms;
    int64_t heartbeat_timeout_ms;
    int64_t ack_deadline_ms;
    int64_t rebalance_grace_ms;
    int64_t expected_workers; /* 0 = unknown: a term's first assignment waits the grace */
    int64_t restart_max_failures;
    int64_t restart_interval_ms;
    int64_t restart_delay_ms;
    int64_t lease_ttl_ms;
    int64_t etcd_timeout_ms;
    int64_t inline_files_max;
    int64_t checkpoint_inline_offsets; /* offsets_base.h */
    int64_t checkpoints_retained;
    int64_t orphan_age_ms;
    int64_t orphan_interval_ms;
    int64_t snapshot_retention_ms;
    int64_t snapshot_min_keep;
    bool compact; /* maintenance.h */
    int64_t compact_interval_ms;
    int64_t compact_min_files;
    int64_t compact_delete_ratio; /* percent */
    int64_t compact_max_age_ms;
    int64_t compact_idle_ms;
    int64_t compact_target_size;
    int64_t compact_rate;
    int64_t metadata_versions_max;
    int64_t progress_timeout_ms;
    int64_t unconsumed_after_ms;
    char *partition_by; /* layout.h */
    char *sort_by;
    char *worker_secret; /* workers prove it at registration (admission.h); NULL = none */
    char *fault;
    cdc_log_options_t log;
} cdc_coord_config_t;

extern const cdc_opt_t cdc_coord_options[];

typedef enum cdc_job_state {
    CDC_JOB_STANDBY = 0, /* not the leader */
    CDC_JOB_STARTING,    /* leader, reading etcd and finishing the previous term's commits */
    CDC_JOB_RECOVERING,  /* leader, waiting to (re)assign partitions */
    CDC_JOB_RUNNING,     /* leader, barriers flowing */
    CDC_JOB_FAILED,      /* restart strategy exhausted */
} cdc_job_state_t;

/* The state's name in logs and /status ("RUNNING", ...). */
static inline const char *cdc_job_state_name(cdc_job_state_t s)
{
    switch (s) {
    case CDC_JOB_STANDBY:
        return "STANDBY";
    case CDC_JOB_STARTING:
        return "STARTING";
    case CDC_JOB_RECOVERING:
        return "RECOVERING";
    case CDC_JOB_RUNNING:
        return "RUNNING";
    case CDC_JOB_FAILED:
        return "FAILED";
    }
    return "UNKNOWN";
}

#define CDC_COMMIT_QUEUE_MAX 32
#define CDC_HISTORY_MAX 16

/* A completed epoch on its way into etcd and Iceberg. */
typedef struct cdc_pending_commit {
    cdc_checkpoint_t *rec; /* owned */
    bool recorded;         /* in etcd: must be committed, whatever happens */
    int64_t barrier_mono;  /* for latency */
    int attempts;
    int64_t record_ms; /* time of the etcd write */
    int64_t commit_ms; /* time of the Iceberg commits */
} cdc_pending_commit_t;

/*
 * The commit round in flight (owned by pipeline.c; docs/design.md, "The epoch protocol"):
 * the recorded epochs at the head of the queue, committed to Iceberg as one group by the
 * commit thread while the loop goes on with barriers, acks and records. The loop reads
 * its outcome after `done`; nothing else touches it while `running`.
 */
typedef struct cdc_commit_round {
    pthread_t thread;
    bool running;      /* started and not yet joined (loop thread) */
    _Atomic bool done; /* the commit thread's last write */
    int n;             /* the queue's first n entries */
    cdc_checkpoint_t *recs[CDC_COMMIT_QUEUE_MAX];
    cdc_committer_t *committer;
    cdc_commit_result_t res;
    cdc_err_t rc;
    cdc_error_t e;
    int64_t ms;       /* the group's commit time */
    int last_size;    /* epochs in the last round that committed (for /status) */
    uint64_t grouped; /* epochs that joined an earlier one's snapshots, ever */
} cdc_commit_round_t;

/* What /status shows about a finished checkpoint. */
typedef struct cdc_ckpt_summary {
    uint64_t epoch;
    int64_t completed_wall_ms;
    int64_t duration_ms; /* barrier -> snapshot visible */
    int64_t bytes;
    int64_t records;
    size_t data_files;
    size_t delete_files;
    int tables;
} cdc_ckpt_summary_t;

#define CDC_CLOSING_MAX 64
#define CDC_TABLE_REQUESTS_MAX 8 /* POST /tables waiting for the loop at a time */

/* A topic POST /tables asks to add to the job's table set (admin.c), applied by the loop
 * (job_tables.c). */
typedef struct cdc_table_request {
    enum { CDC_TABLE_REQUEST_FREE = 0, CDC_TABLE_REQUEST_ASKED, CDC_TABLE_REQUEST_DONE } state;
    char topic[256];
    cdc_err_t rc; /* when DONE: CDC_OK, or why not (msg) */
    bool added;   /* when DONE: false = it was in the set already */
    char msg[256];
    bool abandoned; /* its HTTP thread stopped waiting: the loop frees it */
} cdc_table_request_t;

typedef struct cdc_coord {
    cdc_coord_config_t cfg;
    /* Set by the signal handler, which may run on any thread; atomic so that every
     * thread reads it without a data race (lock-free: allowed in a handler). */
    volatile _Atomic sig_atomic_t *stop;

    cdc_etcd_t *etcd;
    cdc_msg_server_t *msg;
    cdc_http_server_t *http;
    cdc_tls_t *tls;      /* NULL = no certificates */
    cdc_health_t health; /* /healthz: the loop beats it; FAILED is fatal (admin.c) */
    cdc_committer_t *committer;
    cdc_offsets_base_t offsets_base; /* the records' offsets base of this term */
    cdc_maint_t *maint; /* compaction, expiry, orphans: the leader's background thread */
    cdc_leader_t leader;
    cdc_presence_t presence; /* our record under coordinators/, and everyone's */
    cdc_store_t store;
    cdc_metrics_t *metrics;
    char endpoint[256]; /* advertised NNG url */
    char admin[128];    /* advertised admin addr */

    cdc_job_state_t state;
    uint64_t term;
    uint64_t generation;   /* strictly increasing for the life of the process */
    bool assigned_in_term; /* an Assign went out in the current term */
    cdc_members_t members;
    cdc_admission_t admission; /* --worker-secret: the registrations' proofs */
    /* The job's table set (tableset.h): from etcd (or the newest checkpoint's topics) at
     * leader start, widened at assignments; tables_dirty until etcd has the current one. */
    cdc_tableset_t tables;
    bool tables_dirty;
    int64_t tables_retry_ms;
    bool tables_blocked; /* no live worker fits the set: logged once */
    /* topics of the set the brokers did not know at the last look (--kafka), and when to
     * look again (job_tables.c) */
    cdc_tableset_t tables_missing;
    int64_t tables_check_ms;
    /* table topics live workers offer outside the set (unconsumed.h), and when to look
     * again (job_tables.c) */
    cdc_unconsumed_t unconsumed;
    /* staged files checked against the set (staged_check.h); the Acks refused for it */
    cdc_staged_index_t staged_index;
    int64_t security_rejections[CDC_STAGED_REASONS];
    char last_security_event[512];
    /* the schema updates this leader recorded (checkpoint.h): records carry changed ones */
    cdc_schema_memo_t schema_memo;
    int64_t unconsumed_check_ms;
    /* POST /tables (HTTP threads) -> the loop; guarded by tables_lock, tables_cond says a
     * request is DONE */
    pthread_mutex_t tables_lock;
    pthread_cond_t tables_cond;
    cdc_table_request_t table_requests[CDC_TABLE_REQUESTS_MAX];
    _Atomic int table_requests_asked; /* requests in state ASKED: the loop looks when > 0 */
    cdc_epochs_t epochs;
    cdc_restart_t restart;
    char owner[CDC_PARTITIONS][CDC_WORKER_ID_MAX]; /* current assignment */
    char prev_owner[CDC_PARTITIONS][CDC_WORKER_ID_MAX];
    cdc_checkpoint_t *base; /* newest completed checkpoint: start point of assignments */
    uint64_t last_recorded;
    uint64_t last_committed;
    int64_t restart_at_ms;
    int64_t grace_until_ms;
    int64_t next_barrier_ms;
    int64_t etcd_retry_ms;
    int64_t next_status_ms;
    char recovery_reason[256];

    cdc_pending_commit_t queue[CDC_COMMIT_QUEUE_MAX];
    int nqueue;
    cdc_commit_round_t round;
    int64_t commit_retry_ms;
    char last_commit_error[256];
    /* the warehouse's file system full: commits wait (docs/operations.md, "Disk faults") */
    cdc_diskfull_t warehouse_disk;

    /* Pipes a standby rejected (or any coordinator refused: an invalid worker id), closed
     * once the Reject had time to leave (closing at once drops the queued reply inside
     * NNG 1.5.2, which also leaks it). */
    struct {
        uint32_t pipe;
        int64_t due_ms;
        bool refused; /* closed whatever the state: the worker cannot register */
    } closing[CDC_CLOSING_MAX];
    int nclosing;

    cdc_ckpt_summary_t history[CDC_HISTORY_MAX];
    int nhistory;
    cdc_progress_t progress; /* high watermarks from the owners' acks, the progress check */

    /* metrics */
    cdc_counter_t *m_grouped;
    cdc_counter_t *m_committed, *m_failures, *m_rejected, *m_aborted, *m_etcd_errors,
        *m_commit_errors, *m_no_progress, *m_missing_topic, *m_tables_widened,
        *m_refused[CDC_ADMISSION_REASONS], *m_table_refused[CDC_TABLESET_VERDICTS],
        *m_security[CDC_STAGED_REASONS];
    cdc_gauge_t *m_unconsumed; /* tables unconsumed (unconsumed.h) */
    cdc_gauge_t *m_state, *m_term, *m_workers, *m_generation, *m_last_epoch, *m_stall_max,
        *m_stalled_slots;
    cdc_histogram_t *m_latency, *m_record_latency, *m_stall;
    int64_t stall_max_ms; /* longest main-loop iteration as leader */

    cdc_history_t *hist;          /* the dashboard's rings (dashboard.c) */
    cdc_watermarks_t *watermarks; /* topic ends from Kafka (--kafka), NULL = none */
    int64_t next_sample_ms;       /* of the history */
    cdc_gauge_t *m_lag[CDC_PARTITIONS];
    cdc_http_doc_t status; /* the published /status */
    /* a standby's /status answers with the leader's, fetched from this admin address
     * (admin.c); "" = serve our own. Written by the main loop, read by HTTP threads. */
    pthread_mutex_t forward_lock;
    char forward_to[256];
    _Atomic int state_seen; /* c->state for the HTTP thread (/readyz) */
} cdc_coord_t;

/* The commit round, read from the loop thread (pipeline.c owns it): whether one is in
 * flight on the commit thread, and the epochs that shared an earlier epoch's snapshots,
 * ever, with the epochs of the last round that committed in *last_group (/status). */
static inline bool cdc_job_commit_running(const cdc_coord_t *c)
{
    return c->round.running;
}
static inline uint64_t cdc_job_commit_groups(const cdc_coord_t *c, int *last_group)
{
    *last_group = c->round.last_size;
    return c->round.grouped;
}

/* Opens servers and clients from c->cfg. */
cdc_err_t cdc_coord_open(cdc_coord_t *c, cdc_error_t *e);

/* Runs until *c->stop is set. */
void cdc_coord_run(cdc_coord_t *c);

void cdc_coord_close(cdc_coord_t *c);

/* Builds the /status JSON of the current state (main thread); caller frees. */
char *cdc_coord_status_json(cdc_coord_t *c);

/* Registers /status on the HTTP server and the health and ready callbacks (admin.c). */
cdc_err_t cdc_admin_register(cdc_coord_t *c, cdc_error_t *e);

/* Publishes a fresh status snapshot for the HTTP threads (admin.c). */
void cdc_admin_publish(cdc_coord_t *c);

/*
 * Records behind in partition slot p (main thread): over the slot's topics, the newest
 * end known (from Kafka with --kafka, else from the owner's acks) less the newest
 * checkpoint's offset; -1 when no end is known. highs (may be NULL) gets {topic: end}
 * (lag.c).
 */
int64_t cdc_coord_lag(cdc_coord_t *c, int p, struct json_t *highs);

/* Registers the dashboard's page (/ and /ui) and /history (dashboard.c). */
cdc_err_t cdc_dashboard_register(cdc_coord_t *c, cdc_error_t *e);

/* Takes the history's sample of now, once a second as leader (main thread). */
void cdc_dashboard_sample(cdc_coord_t *c, int64_t now);

/* Records a committed epoch and what it left in its tables (main thread, after the
 * commit). */
void cdc_dashboard_committed(cdc_coord_t *c, const cdc_checkpoint_t *rec, int64_t duration_ms,
                             int64_t commit_ms);

#endif
