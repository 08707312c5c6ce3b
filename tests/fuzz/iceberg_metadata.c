/* Fuzz target: Iceberg table metadata JSON as read back from the warehouse
 * (common/iceberg/metadata.h): parsed, its lookups run, written and parsed again. */
#include "common/iceberg/metadata.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cdc_ice_metadata_t md, copy, again;
    cdc_error_t e;
    char *json = NULL;

    if (cdc_ice_metadata_parse((const char *)data, size, &md, &e) != CDC_OK)
        return 0;
    (void)cdc_ice_metadata_current_schema(&md);
    (void)cdc_ice_metadata_current_snapshot(&md);
    (void)cdc_ice_metadata_default_sort_order(&md);
    const cdc_ice_partition_spec_t *spec = cdc_ice_metadata_default_spec(&md);
    if (spec != NULL) {
        cdc_ice_field_t *fields = calloc(spec->nfields + 1, sizeof(*fields));
        if (fields != NULL)
            (void)cdc_ice_metadata_spec_result_fields(&md, spec, fields);
        free(fields);
    }
    if (cdc_ice_metadata_copy(&copy, &md) == CDC_OK)
        cdc_ice_metadata_free(&copy);
    if (cdc_ice_metadata_write(&md, &json, &e) == CDC_OK) {
        if (cdc_ice_metadata_parse(json, strlen(json), &again, &e) == CDC_OK)
            cdc_ice_metadata_free(&again);
        free(json);
    }
    cdc_ice_metadata_free(&md);
    return 0;
}
