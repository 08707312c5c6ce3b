/* Fuzz target: the worker's JSON scanner (worker/jsonscan.h). A document it accepts must
 * be the document jansson reads from the same bytes. */
#include <stdio.h>

#include <jansson.h>

#include "tests/fuzz/fuzz.h"
#include "worker/jsonscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    json_t *fast = cdc_json_scan(buf, size);

    if (fast != NULL) {
        json_t *ref = json_loadb(buf, size, 0, NULL);
        if (ref == NULL || !json_equal(fast, ref)) {
            fprintf(stderr, "jsonscan: cdc_json_scan accepted what jansson reads %s\n",
                    ref ? "differently" : "as invalid");
            abort();
        }
        json_decref(ref);
        json_decref(fast);
    }
    json_decref(cdc_json_load(buf, size, NULL));
    json_decref(cdc_json_load_scoped(buf, size, NULL));
    cdc_json_scope_end();
    return 0;
}
