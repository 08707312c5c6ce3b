/* Fuzz target: pgoutput messages as the walsender streams them (capture/pgoutput.h),
 * the payload of one XLogData message. */
#include "capture/pgoutput.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cdc_pgo_scratch_t scratch;
    cdc_pgo_msg_t msg;
    cdc_error_t e;

    memset(&scratch, 0, sizeof(scratch));
    /* twice with one scratch: the second decode reuses what the first one grew */
    for (int i = 0; i < 2; i++)
        (void)cdc_pgo_decode(data, size, &scratch, &msg, &e);
    cdc_pgo_scratch_free(&scratch);
    return 0;
}
