/* Fuzz target: schema documents from the schema topic (common/cdcschema.h): decoded, then
 * re-encoded and turned into an Iceberg schema as the worker and the coordinator do, and
 * registered in a worker catalog (worker/catalog.h). */
#include "common/cdcschema.h"
#include "tests/fuzz/fuzz.h"
#include "worker/catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cdc_schema_doc_t doc, copy;
    cdc_error_t e;
    const char *json = (const char *)data;

    if (cdc_schema_doc_decode(json, size, &doc, &e) == CDC_OK) {
        char *out = NULL;
        cdc_ice_schema_t ice;
        if (cdc_schema_doc_encode(&doc, &out, &e) == CDC_OK) {
            cdc_schema_doc_t again;
            if (cdc_schema_doc_decode(out, strlen(out), &again, &e) == CDC_OK) {
                (void)cdc_schema_doc_same_shape(&doc, &again);
                cdc_schema_doc_free(&again);
            }
            free(out);
        }
        if (cdc_schema_doc_to_iceberg(&doc, &ice, &e) == CDC_OK)
            cdc_schema_ice_free(&ice);
        if (cdc_schema_doc_copy(&copy, &doc) == CDC_OK) {
            cdc_schema_doc_t next;
            if (cdc_schema_doc_copy(&next, &doc) == CDC_OK) {
                if (cdc_schema_doc_assign_ids(&copy, &next, &e) == CDC_OK) {
                    (void)cdc_schema_doc_rewrites_rows(&copy, &next);
                    (void)cdc_schema_doc_drops_rows(&copy, &next);
                }
                cdc_schema_doc_free(&next);
            }
            cdc_schema_doc_free(&copy);
        }
        cdc_schema_doc_free(&doc);
    }

    cdc_catalog_t *cat = cdc_catalog_new();
    if (cat != NULL) {
        (void)cdc_catalog_register_json(cat, "cdc.public.t", 1, json, size, &e);
        (void)cdc_catalog_latest(cat, "cdc.public.t");
        cdc_catalog_free(cat);
    }
    return 0;
}
