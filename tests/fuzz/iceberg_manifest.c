/*
 * Fuzz target: Avro files of the warehouse (common/iceberg/manifest.h, avro.h): each input
 * read as a manifest list and as a manifest, without partition fields and with one of
 * several types, as the coordinator and compaction read them back.
 */
#include "common/iceberg/manifest.h"
#include "tests/fuzz/fuzz.h"

/*
 * Two behaviours of avro-c 1.11 on corrupt files, not ours to fix:
 * - it leaks on corrupt input: the value class it made for the writer schema when
 *   avro_file_reader_fp fails after reading the header (a block it cannot decode), a
 *   datum's buffer when avro_file_reader_read_value fails inside a record: ignored in
 *   those two functions only (matching them needs the slow unwinder: avro-c has no frame
 *   pointers; a leak of ours through them is hidden too, but the unit tests under
 *   `make asan` read valid files without leaks);
 * - it allocates the size a length inside a block claims: manifest_read.c checks the
 *   container's framing and caps each of avro-c's allocations at what the file could
 *   hold, so a refused size fails as malloc's failure does and avro-c reports an error.
 */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:avro_file_reader_fp\nleak:avro_file_reader_read_value\n";
}
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0:allocator_may_return_null=1";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const cdc_ice_field_t parts[] = {
        {.id = 1000, .name = "p_int", .type = CDC_ICE_INT},
        {.id = 1001, .name = "p_dec", .type = CDC_ICE_DECIMAL, .precision = 10, .scale = 2},
        {.id = 1002, .name = "p_str", .type = CDC_ICE_STRING},
        {.id = 1003, .name = "p_date", .type = CDC_ICE_DATE},
    };
    cdc_ice_manifest_file_t *files = NULL, mf;
    cdc_ice_manifest_entry_t *entries = NULL;
    size_t n = 0;
    cdc_error_t e;
    char *value = NULL;

    if (cdc_ice_manifest_list_read(data, size, &files, &n, &e) == CDC_OK)
        cdc_ice_manifest_files_free(files, n);

    memset(&mf, 0, sizeof(mf));
    mf.spec_id = -1;
    mf.sequence_number = 5;
    mf.min_sequence_number = 1;
    mf.added_snapshot_id = 42;
    for (size_t p = 0; p <= sizeof(parts) / sizeof(parts[0]); p++) {
        const cdc_ice_field_t *pf = p == 0 ? NULL : &parts[p - 1];
        if (cdc_ice_manifest_read(data, size, &mf, pf, pf ? 1 : 0, &entries, &n, &e) == CDC_OK) {
            cdc_ice_manifest_file_t sum;
            memset(&sum, 0, sizeof(sum));
            if (cdc_ice_manifest_summarize(entries, n, pf, pf ? 1 : 0, &sum) == CDC_OK)
                cdc_ice_manifest_file_clear(&sum);
            cdc_ice_manifest_entries_free(entries, n);
        }
    }
    if (cdc_avro_header_get(data, size, "schema", &value, &e) == CDC_OK)
        free(value);
    return 0;
}
