/* Fuzz target: Parquet files of the warehouse (common/iceberg/parquet_read.h, thrift.h):
 * the footer and then every column's pages, as compaction and the checks read them. */
#include "common/iceberg/parquet_read.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cdc_pq_reader_t *r = NULL;
    cdc_error_t e;

    if (cdc_pq_reader_open(data, size, &r, &e) != CDC_OK)
        return 0;
    const cdc_ice_schema_t *s = cdc_pq_reader_schema(r);
    (void)cdc_pq_reader_rows(r);
    for (size_t c = 0; s != NULL && c < s->nfields; c++) {
        const cdc_ice_value_t *values;
        (void)cdc_pq_reader_column(r, c, &values, &e);
    }
    cdc_pq_reader_free(r);
    return 0;
}
