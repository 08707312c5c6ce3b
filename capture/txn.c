/*
 * The current transaction (docs/capture.md): this file owns cap->tx. changes.c sets it
 * from the stream's Begin and ends it at Commit, remembering the last committed xids;
 * incremental.c and snapshot.c put a transaction of their own in place around a truncate
 * they emit, and put the stream's back; output.c, probe.c and the others read it. Main
 * thread only. Calls nothing of the capture.
 */
#include "capture/stream_int.h"

const cdc_capture_txpos_t *cdc_capture_tx(const cdc_capture_t *cap)
{
    return &cap->tx.pos;
}

void cdc_capture_tx_set(cdc_capture_t *cap, const cdc_capture_txpos_t *pos)
{
    cap->tx.pos = *pos;
}

void cdc_capture_tx_end(cdc_capture_t *cap)
{
    cap->tx.recent_xids[cap->tx.recent_next++ % CDC_CAPTURE_RECENT_XIDS] = cap->tx.pos.xid;
    cap->tx.pos.id = 0;
}

void cdc_capture_tx_reset(cdc_capture_t *cap)
{
    cap->tx.pos.id = 0;
}

bool cdc_capture_tx_visible(const cdc_capture_t *cap)
{
    return cap->tx.visible_xid == cap->tx.pos.xid;
}

void cdc_capture_tx_mark_visible(cdc_capture_t *cap)
{
    cap->tx.visible_xid = cap->tx.pos.xid;
}

uint32_t cdc_capture_tx_recent_unseen(const cdc_capture_t *cap, const cdc_chunk_snapshot_t *snap)
{
    for (size_t i = 0; i < CDC_CAPTURE_RECENT_XIDS && i < cap->tx.recent_next; i++)
        if (!cdc_chunk_snapshot_sees(snap, cap->tx.recent_xids[i]))
            return cap->tx.recent_xids[i];
    return 0;
}
